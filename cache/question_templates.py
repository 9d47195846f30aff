"""Question templates across ten domains (support, coding, cooking, medicine, law, travel,
science, devices, HR and product questions), whose slots multiply into tens of thousands of
distinct questions that differ from each other in one slot or more. Two uses: near-misses the
answer verifier learns from (cache/verifier_pairs.py: one slot swapped is another question,
often one plain word: "a quick lasagne recipe" / "a one-pot lasagne recipe"), and questions
nobody asked before for bench/cache_miss.py (bench/question_bank.py).
"""

from __future__ import annotations

# Each template with its slots: choices separated by "|"; every combination is one question.
TEMPLATES: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "How do I {} {} in {}?",
        (
            (
                "install|configure|debug|update|remove|back up|migrate|secure|monitor|profile|"
                "test|deploy"
            ),
            (
                "a database|a web server|a cron job|a virtual environment|a firewall|"
                "a message queue|a load balancer|a certificate|a container|a cache|"
                "a logging pipeline|a user account"
            ),
            (
                "Python|Docker|Kubernetes|Ubuntu|Windows|macOS|Rust|Go|Node.js|PostgreSQL|AWS|"
                "Terraform"
            ),
        ),
    ),
    (
        "What is the difference between {} and {} in {}?",
        (
            (
                "a mutex|a thread|a process|a list|a tuple|an interface|a class|a closure|"
                "an index|a view|a lock|a coroutine"
            ),
            (
                "a semaphore|a fibre|a task|an array|a set|a trait|a struct|a lambda|a key|"
                "a table|a latch|a generator"
            ),
            "Java|C++|Python|SQL|Rust|Kotlin|Swift|Haskell",
        ),
    ),
    (
        "Can you suggest a {} {} recipe for {} people?",
        (
            (
                "vegan|gluten-free|spicy|quick|budget|low-carb|festive|kid-friendly|one-pot|"
                "slow-cooked"
            ),
            (
                "lentil curry|mushroom risotto|chicken stew|tofu stir-fry|bean chilli|"
                "pumpkin soup|fish pie|lamb tagine|paella|ramen|lasagne|shakshuka|dal|goulash|"
                "pad thai|falafel|moussaka|gumbo|bibimbap|biryani"
            ),
            "two|three|four|five|six|eight|ten|twelve|fifteen|twenty",
        ),
    ),
    (
        "What are the common {} of {} for {}?",
        (
            "side effects|interactions|dosages|warnings|alternatives|contraindications",
            (
                "ibuprofen|metformin|amoxicillin|lisinopril|sertraline|warfarin|omeprazole|"
                "atorvastatin|levothyroxine|prednisone|melatonin|cetirizine|insulin glargine|"
                "salbutamol|gabapentin|tramadol|diazepam|zinc supplements|vitamin D|"
                "iron tablets"
            ),
            (
                "children|pregnant women|older adults|athletes|people with asthma|"
                "people with diabetes|teenagers|nursing mothers|people with kidney disease|"
                "shift workers"
            ),
        ),
    ),
    (
        "Is it legal to {} in {} without {}?",
        (
            (
                "rent out my flat|fly a drone|sell homemade food|work as a freelancer|"
                "record a phone call|import a car|keep bees|busk in the street|"
                "camp in the wild|sublet a room|run a raffle|hire an intern|"
                "carry a pocket knife|fish in a lake|build a shed"
            ),
            (
                "France|Germany|Spain|Italy|Canada|Japan|Brazil|India|Australia|Mexico|Sweden|"
                "Poland|Ireland|Portugal|Norway|Kenya|Chile|Vietnam|Turkey|Egypt"
            ),
            (
                "a licence|a permit|insurance|registration|written consent|a contract|"
                "a tax number|a health certificate"
            ),
        ),
    ),
    (
        "How much is a flight from {} to {} in {}?",
        (
            (
                "London|Paris|Berlin|Madrid|Rome|Lisbon|Dublin|Oslo|Vienna|Prague|Athens|"
                "Warsaw|Zurich|Istanbul|Cairo|Dubai|Delhi|Tokyo|Seoul|Sydney"
            ),
            (
                "New York|Chicago|Toronto|Boston|Miami|Denver|Seattle|Mexico City|Lima|Bogota|"
                "Santiago|Havana|Montreal|Vancouver|Atlanta|Dallas|Houston|Phoenix"
            ),
            (
                "January|February|March|April|May|June|July|August|September|October|November|"
                "December"
            ),
        ),
    ),
    (
        "Explain {} to {} using {}.",
        (
            (
                "compound interest|photosynthesis|inflation|black holes|vaccination|"
                "supply and demand|plate tectonics|machine learning|the immune system|"
                "blockchains|climate change|the stock market|evolution|gravity|"
                "electric circuits|public key cryptography|mortgages|the water cycle|"
                "quantum entanglement|index funds"
            ),
            (
                "a ten-year-old|a new employee|my grandmother|a high-school class|"
                "a software engineer|a nurse|a farmer|an investor"
            ),
            (
                "an analogy|a story|three bullet points|a diagram description|"
                "a worked example|a short poem"
            ),
        ),
    ),
    (
        "My {} {} after {}. What should I do?",
        (
            (
                "laptop|phone|printer|router|car|dishwasher|washing machine|smart watch|"
                "tablet|television|fridge|boiler|e-bike|headphones|camera"
            ),
            (
                "keeps restarting|will not turn on|overheats|makes a clicking noise|"
                "drains its battery|lost its settings|shows an error code|runs very slowly|"
                "leaks water|disconnects|smells of burning|freezes"
            ),
            (
                "a software update|a power cut|being dropped|getting wet|a move|"
                "a factory reset|a week unused|a firmware upgrade|a repair|a cold night|"
                "cleaning it|changing the battery"
            ),
        ),
    ),
    (
        "How should an employee {} when {}?",
        (
            (
                "ask for a raise|request parental leave|report harassment|resign politely|"
                "negotiate remote work|dispute a warning|request a transfer|ask for training|"
                "report an injury|take sick leave"
            ),
            (
                "their manager is new|the company is being sold|they are on probation|"
                "they work part time|their contract is temporary|they work abroad|"
                "the team is downsizing|they just returned from leave"
            ),
        ),
    ),
    (
        "Does the {} {} support {}?",
        (
            "basic|pro|business|enterprise|student|family",
            "plan|subscription|licence|tier|bundle",
            (
                "single sign-on|offline mode|data export|two-factor login|custom domains|"
                "API access|audit logs|shared folders|priority support|invoices in euros|"
                "multiple users|a free trial"
            ),
        ),
    ),
)
