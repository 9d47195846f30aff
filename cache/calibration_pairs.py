"""Question pairs on which the ONNX export measures how far int8 moves a cosine from fp32's, on
the machine it runs on (cache.onnx_model): the referee's margin is sized from that measurement.

What matters is where the pairs fall and what the texts look like, not labels: paraphrases,
near-misses (one number, name or word changed), related questions and unrelated ones, so that
fp32 cosines span ~0.3-1.0, most of them around the thresholds a cache runs at (0.8-0.95), where
a shift flips a decision. The texts vary as traffic does (questions, terse commands, SQL and
code, arithmetic in symbols, lower case and typos), because int8's error is the text's: a few
texts (a SQL request, "Tell me a joke") moved four times as far as the median one.

Written apart from bench/data/semantic_pairs.jsonl, which stays a held-out set for
bench.semantic; tests/integration/cache/test_embedder.py holds out its own pairs too.
"""

from __future__ import annotations

Pair = tuple[str, str]

_CODE: tuple[Pair, ...] = (
    (
        "How do I sort a list of tuples by the second element in Python?",
        "Sort Python tuples by their second item",
    ),
    (
        "How do I sort a list of tuples by the second element in Python?",
        "How do I sort a list of tuples by the first element in Python?",
    ),
    ("What does the yield keyword do in Python?", "Explain Python's yield statement"),
    ("What does the yield keyword do in Python?", "What does the return keyword do in Python?"),
    ("How can I undo the last git commit?", "Revert my most recent commit in git"),
    ("How can I undo the last git commit?", "How can I undo the last git push?"),
    ("Why is my JavaScript promise never resolving?", "my JS promise hangs and never resolves??"),
    ("Convert a string to an integer in Java", "How do I parse an int from a String in Java?"),
    ("Convert a string to an integer in Java", "Convert an integer to a string in Java"),
    ("What is a segmentation fault in C?", "What causes segfaults in C programs?"),
    ("How do I read a CSV file with pandas?", "Load a CSV into a pandas DataFrame"),
    ("How do I read a CSV file with pandas?", "How do I write a CSV file with pandas?"),
    ("Difference between a list and a tuple in Python", "How do Python lists differ from tuples?"),
    ("How do I vertically align text in a flexbox?", "css flexbox: center text vertically"),
    ("How do I vertically align text in a flexbox?", "How do I horizontally align text in a grid?"),
    ("What is Big O notation?", "Explain time complexity and Big O"),
    ("How do I install a package with pip?", "How do I uninstall a package with pip?"),
    ("for i in range(10): print(i)", "for i in range(10):\n    print(i * 2)"),
    (
        "Fix this error: TypeError: 'NoneType' object is not subscriptable",
        "Why do I get TypeError: 'NoneType' object is not subscriptable?",
    ),
    (
        "Fix this error: TypeError: 'NoneType' object is not subscriptable",
        "Fix this error: KeyError: 'id'",
    ),
    (
        "Write a bash one-liner to count files in a directory",
        "bash command to count the files in a folder",
    ),
    (
        "Write a bash one-liner to count files in a directory",
        "Write a bash one-liner to delete files in a directory",
    ),
    ("Explain recursion with an example", "How do I bake sourdough bread at home?"),
)

_DATA: tuple[Pair, ...] = (
    (
        "Write a SQL query to find duplicate emails in a users table",
        "SQL to list emails that appear more than once in users",
    ),
    (
        "Write a SQL query to find duplicate emails in a users table",
        "Write a SQL query to delete duplicate emails in a users table",
    ),
    ("SELECT * FROM orders WHERE total > 100", "SELECT * FROM orders WHERE total < 100"),
    ("SELECT * FROM orders WHERE total > 100", "SQL: get all orders with a total over 100"),
    ("How do I join two tables in SQL?", "Explain SQL joins between two tables"),
    ("How do I join two tables in SQL?", "How do I union two tables in SQL?"),
    (
        "Write a SQL query for the average salary per department",
        "average salary by department sql query",
    ),
    (
        "Write a SQL query for the average salary per department",
        "Write a SQL query for the maximum salary per department",
    ),
    ("Regex to match an email address", "regular expression that validates email addresses"),
    ("Regex to match an email address", "Regex to match a phone number"),
    ("How do I make a pivot table in Excel?", "Create a pivot table in an Excel sheet"),
    ("Excel formula to sum a column if the cell says paid", "SUMIF formula for rows marked paid"),
    ("What is the difference between mean and median?", "mean vs median, which to use?"),
)

_COOKING: tuple[Pair, ...] = (
    ("How long should I boil an egg for a runny yolk?", "Boiling time for a soft-boiled egg?"),
    (
        "How long should I boil an egg for a runny yolk?",
        "How long should I boil an egg for a hard yolk?",
    ),
    ("What can I use instead of buttermilk?", "Substitute for buttermilk in baking"),
    ("What can I use instead of buttermilk?", "What can I use instead of heavy cream?"),
    ("How do I keep rice from getting sticky?", "tips for fluffy non sticky rice"),
    (
        "What temperature should I roast a chicken at?",
        "At what oven temperature do you roast a whole chicken?",
    ),
    (
        "What temperature should I roast a chicken at?",
        "What temperature should I roast a turkey at?",
    ),
    ("How do I make a roux?", "Steps to make a roux for gravy"),
    ("Can I freeze cooked pasta?", "Is it okay to freeze leftover cooked pasta?"),
    ("Can I freeze cooked pasta?", "Can I freeze cooked potatoes?"),
    ("How many grams are in a cup of flour?", "How many grams are in a cup of sugar?"),
    ("Why did my cake sink in the middle?", "What makes a cake collapse in the center?"),
    ("How do I sharpen a kitchen knife?", "Best way to hone and sharpen a chef's knife"),
    ("Recipe for a vegan chocolate cake", "Recipe for a gluten-free chocolate cake"),
    ("give me a recipe for pancakes", "pancake recipe pls"),
    ("How do I caramelize onions?", "What is the tallest mountain in Africa?"),
)

_TRAVEL: tuple[Pair, ...] = (
    (
        "Do I need a visa to visit Japan from Canada?",
        "Is a visa required for Canadians travelling to Japan?",
    ),
    (
        "Do I need a visa to visit Japan from Canada?",
        "Do I need a visa to visit China from Canada?",
    ),
    (
        "What is the best time of year to visit Iceland?",
        "When should I go to Iceland for good weather?",
    ),
    (
        "What is the best time of year to visit Iceland?",
        "What is the best time of year to visit Norway?",
    ),
    (
        "How early should I arrive for an international flight?",
        "How long before an international flight should I get to the airport?",
    ),
    (
        "How early should I arrive for an international flight?",
        "How early should I arrive for a domestic flight?",
    ),
    ("Can I bring a power bank in checked luggage?", "Are power banks allowed in checked bags?"),
    ("Can I bring a power bank in checked luggage?", "Can I bring a power bank in my carry-on?"),
    (
        "How do I get from Heathrow to central London?",
        "Best way from Heathrow airport into the city centre",
    ),
    ("Is tap water safe to drink in Mexico City?", "Can you drink the tap water in Mexico City?"),
    ("Is tap water safe to drink in Mexico City?", "Is tap water safe to drink in Lisbon?"),
    ("What plug adapter do I need for Italy?", "Which power adapter works in Italian sockets?"),
    ("Cheap things to do in Paris", "Free activities in Paris on a budget"),
    ("Cheap things to do in Paris", "Cheap things to do in Rome"),
    ("book me a table for two tonight", "reserve a table for 2 people this evening"),
    ("book me a table for two tonight", "book me a table for four tomorrow"),
    ("How do I renew my passport?", "How do I replace a lost driver's licence?"),
)

_HEALTH: tuple[Pair, ...] = (
    ("What are the symptoms of dehydration?", "How can I tell if I'm dehydrated?"),
    ("What are the symptoms of dehydration?", "What are the symptoms of heatstroke?"),
    ("How many glasses of water should an adult drink?", "Daily recommended water intake"),
    ("Is it safe to take ibuprofen with coffee?", "Can I drink coffee after taking ibuprofen?"),
    ("Is it safe to take ibuprofen with coffee?", "Is it safe to take ibuprofen with alcohol?"),
    ("How can I fall asleep faster?", "Tips to help me fall asleep quickly"),
    ("How can I fall asleep faster?", "How can I wake up earlier?"),
    ("What is a normal resting heart rate?", "What resting heart rate is considered healthy?"),
    ("What is a normal resting heart rate?", "What is a normal blood pressure?"),
    ("How many calories are in a banana?", "How many calories are in an apple?"),
    ("Exercises to relieve lower back pain", "Stretches that help with lower back pain"),
    ("Exercises to relieve lower back pain", "Exercises to relieve neck pain"),
    ("How many days does a cold usually last?", "how long do colds last"),
    ("Is a sore throat a sign of COVID?", "Can a sore throat be a symptom of COVID-19?"),
    ("my knee hurts when i run", "knee pain while running, what should I do?"),
    ("How do vaccines work?", "What is the exchange rate of the euro to the dollar?"),
)

_FINANCE: tuple[Pair, ...] = (
    ("What is a Roth IRA?", "Explain how a Roth IRA works"),
    ("What is a Roth IRA?", "What is a traditional IRA?"),
    ("How is compound interest calculated?", "Formula for compound interest"),
    ("How is compound interest calculated?", "How is simple interest calculated?"),
    ("Should I pay off debt or invest first?", "Is it better to invest or pay down my debt?"),
    ("How do I improve my credit score?", "Ways to raise my credit score quickly"),
    ("How do I improve my credit score?", "How do I check my credit score?"),
    ("What is the difference between a stock and a bond?", "How do stocks differ from bonds?"),
    ("What happens if I miss a credit card payment?", "Consequences of a late credit card payment"),
    ("What happens if I miss a credit card payment?", "What happens if I miss a mortgage payment?"),
    ("How much should I save for retirement each month?", "Monthly retirement savings target"),
    ("What is an index fund?", "What is a hedge fund?"),
    ("How do I file my taxes online?", "How do I file my taxes by mail?"),
    ("transfer $200 to savings", "move 200 dollars into my savings account"),
    ("transfer $200 to savings", "transfer $500 to savings"),
    ("What is inflation?", "How do I change a flat tyre?"),
)

_SCIENCE: tuple[Pair, ...] = (
    ("Why is the sky blue?", "What makes the sky look blue?"),
    ("Why is the sky blue?", "Why is the sunset red?"),
    ("How does photosynthesis work?", "Explain the process of photosynthesis"),
    ("How does photosynthesis work?", "How does cellular respiration work?"),
    ("How far away is the Moon?", "What is the distance from the Earth to the Moon?"),
    ("How far away is the Moon?", "How far away is the Sun?"),
    ("At what temperature does iron melt?", "What is the melting point of iron?"),
    ("At what temperature does iron melt?", "At what temperature does aluminium melt?"),
    ("How do black holes form?", "What causes a black hole to form?"),
    ("What is DNA made of?", "What are the building blocks of DNA?"),
    ("What is DNA made of?", "What is RNA made of?"),
    ("Why do we have seasons on Earth?", "What causes the seasons?"),
    ("How many planets are in the solar system?", "How many moons does Saturn have?"),
    ("What is quantum entanglement?", "Recommend a good thriller novel"),
)

_SUPPORT: tuple[Pair, ...] = (
    ("How can I change my login password?", "I want to set a new password for my login"),
    ("How can I change my login password?", "How can I change my login email?"),
    ("How do I end my membership?", "I want to cancel my plan, how do I do that?"),
    ("How do I end my membership?", "How do I upgrade my membership?"),
    ("Has my package shipped yet?", "Can you tell me the status of my order?"),
    ("Has my package shipped yet?", "Has my refund been processed yet?"),
    ("How do I update my billing address?", "Change the billing address on my account"),
    ("How do I update my billing address?", "How do I update my shipping address?"),
    ("Can I exchange shoes that don't fit?", "the shoes i ordered are too small can i swap them"),
    ("Can I exchange shoes that don't fit?", "Can I exchange a jacket that doesn't fit?"),
    ("Do you ship to Australia?", "Do you deliver orders to Australia?"),
    ("Do you ship to Australia?", "Do you ship to New Zealand?"),
    ("How do I turn on 2FA?", "Set up two-step verification on my account"),
    ("How do I close my account for good?", "How do I deactivate my account temporarily?"),
    ("my payment keeps failing", "Why does my card get declined at checkout?"),
    ("the app crashes when I open it", "app keeps crashing on startup"),
    ("the app crashes when I open it", "the app is slow when I open it"),
    ("talk to a human", "I want to speak to a real person"),
    ("How do I contact customer service?", "What's the best pizza topping?"),
)

_DEVICE: tuple[Pair, ...] = (
    ("turn off the kitchen lights", "switch the kitchen lights off"),
    ("turn off the kitchen lights", "turn on the kitchen lights"),
    ("set an alarm for 6:40", "wake me up at 6:40 am"),
    ("set an alarm for 6:40", "set an alarm for 7:45"),
    ("play some jazz", "put on jazz music"),
    ("play some jazz", "play some rock"),
    ("what's the weather tomorrow", "will it rain tomorrow?"),
    ("what's the weather tomorrow", "what's the weather this weekend"),
    ("set the thermostat to 21 degrees", "make it 21 degrees in here"),
    ("set the thermostat to 21 degrees", "set the thermostat to 18 degrees"),
    ("remind me to call mum at 5", "set a reminder to phone my mother at 5pm"),
    ("volume up", "turn it up"),
    ("lock the garage door", "is the garage door locked?"),
    ("start the vacuum", "what time is sunset?"),
)

_CHAT: tuple[Pair, ...] = (
    ("tell me a story", "tell me a story about pirates"),
    ("tell me a fun fact", "give me an interesting fact"),
    ("Tell me a joke about cats", "Tell me a joke about dogs"),
    ("hello", "hi there"),
    ("thanks!", "thank you so much"),
    ("what can you do?", "what are you able to help with?"),
    ("I'm bored", "suggest something fun to do"),
    ("Suggest a name for a golden retriever puppy", "name ideas for my new golden retriever"),
    ("Suggest a name for a golden retriever puppy", "Suggest a name for a black cat"),
    ("How are you today?", "Explain the rules of chess"),
)

_HISTORY_GEOGRAPHY: tuple[Pair, ...] = (
    ("When did the Korean War end?", "In what year did the Korean War end?"),
    ("When did the Korean War end?", "When did the Vietnam War end?"),
    ("Who painted The Night Watch?", "Who was the artist of The Night Watch?"),
    ("Who painted The Night Watch?", "Who painted Girl with a Pearl Earring?"),
    ("What is the capital of Canada's province of Quebec?", "Which city is Quebec's capital?"),
    ("What is the capital of New Zealand?", "What is the capital of Fiji?"),
    ("Why did the Roman Empire fall?", "What caused the fall of the Roman Empire?"),
    ("What is the deepest point in the ocean?", "Where is the deepest part of the sea?"),
    ("What is the deepest point in the ocean?", "What is the highest point on land?"),
    ("Who built the pyramids of Giza?", "Who constructed the Great Pyramids in Egypt?"),
    ("How many countries are in Africa?", "How many countries are in South America?"),
    ("When was the Sydney Opera House built?", "When was the Golden Gate Bridge built?"),
    ("What language do they speak in Argentina?", "What is the main language of Argentina?"),
    ("Where is Mount Kilimanjaro?", "How do I unclog a kitchen sink?"),
)

_HOME: tuple[Pair, ...] = (
    ("How do I unclog a bathroom drain?", "What's the best way to clear a clogged bathroom drain?"),
    ("How do I unclog a bathroom drain?", "How do I fix a leaking bathroom faucet?"),
    ("How often should I water a cactus?", "How frequently does a cactus need watering?"),
    ("How often should I water a cactus?", "How often should I water an orchid?"),
    ("How do I get rid of mould in the shower?", "Removing mold from shower grout"),
    ("What paint finish is best for a kitchen?", "Which type of paint should I use in a kitchen?"),
    ("What paint finish is best for a kitchen?", "What paint finish is best for a bedroom?"),
    ("How do I hang a heavy mirror on drywall?", "Mounting a heavy mirror on plasterboard"),
    ("Why is my fridge making a buzzing noise?", "My refrigerator is buzzing loudly, why?"),
    ("Why is my fridge making a buzzing noise?", "Why is my freezer not cooling?"),
    (
        "How do I remove a red wine stain from carpet?",
        "How do I remove a coffee stain from carpet?",
    ),
    ("When should I plant tomato seeds?", "When is the right time to sow tomatoes?"),
    ("How do I bleed a radiator?", "What is the plot of Pride and Prejudice?"),
)

_SPORTS: tuple[Pair, ...] = (
    ("How many players are on a rugby union team?", "How many players does a rugby side field?"),
    ("How many players are on a rugby union team?", "How many players are on a hockey team?"),
    ("What is the offside rule in football?", "Explain offside in soccer"),
    (
        "Who has won the most Wimbledon titles?",
        "Which player has the most Wimbledon championships?",
    ),
    ("Who has won the most Wimbledon titles?", "Who has won the most US Open titles?"),
    ("How long is a marathon?", "What is the distance of a marathon?"),
    ("How long is a marathon?", "How long is a half marathon?"),
    ("How do I improve my running pace?", "Tips to run faster"),
    ("How do I train for a 5K?", "How do I train for a 10K?"),
    ("When are the next Olympic Games?", "When are the next Winter Olympics?"),
    ("How is a tennis match scored?", "How much yeast goes in a loaf of bread?"),
)

_WRITING: tuple[Pair, ...] = (
    ("Write a short poem about the moon", "Compose a brief poem about the moon"),
    ("Write a short poem about the moon", "Write a short poem about the mountains"),
    (
        "Summarise this article in three bullet points",
        "Give me a three-point summary of this article",
    ),
    (
        "Summarise this article in three bullet points",
        "Summarise this article in five bullet points",
    ),
    ("Translate 'thank you' into Spanish", "How do you say thank you in Spanish?"),
    ("Translate 'thank you' into Spanish", "Translate 'thank you' into French"),
    ("Write a cover letter for a nursing job", "Draft a cover letter for a nurse position"),
    ("Write a cover letter for a nursing job", "Write a resignation letter for a nursing job"),
    ("What is the difference between affect and effect?", "Affect vs effect: when to use which?"),
    ("Give me a word that means sad", "Give me a word that means angry"),
    ("Proofread this paragraph for grammar", "Check this paragraph for grammar mistakes"),
    ("Make this email sound more polite", "rewrite my email so it's more polite"),
    ("Write a limerick about a programmer", "How do I convert Celsius to Fahrenheit?"),
)

_MATHS: tuple[Pair, ...] = (
    ("What is 12% of 250?", "Calculate twelve percent of 250"),
    ("What is 12% of 250?", "What is 15% of 250?"),
    ("How do I find the area of a circle?", "Formula for the area of a circle"),
    ("How do I find the area of a circle?", "How do I find the circumference of a circle?"),
    ("What is the derivative of sin(x)?", "Differentiate sin x"),
    ("What is the derivative of sin(x)?", "What is the integral of sin(x)?"),
    ("Solve 2x + 6 = 14", "Solve for x: 2x + 6 = 14"),
    ("Solve 2x + 6 = 14", "Solve 2x + 6 = 18"),
    ("Is 221 a prime number?", "Is 223 a prime number?"),
    ("How many minutes are in a week?", "How many minutes are there in 7 days?"),
    ("How many minutes are in a week?", "How many minutes are in a month?"),
    ("What is the Pythagorean theorem?", "Explain a squared plus b squared equals c squared"),
    ("Convert 5 miles to kilometres", "Convert 5 kilometres to miles"),
    ("What is the mean of 3, 7 and 11?", "What is the median of 3, 7 and 11?"),
    ("640 / 16 = ?", "What is 640 divided by 16?"),
    ("640 / 16 = ?", "640 * 16 = ?"),
    ("7^3", "what is 7 cubed"),
    ("What is a logarithm?", "Where can I watch the Champions League final?"),
)

_MIXED: tuple[Pair, ...] = (
    ("How can I change my login password?", "How do I reset my router?"),
    ("What is the capital of New Zealand?", "What is the population of New Zealand?"),
    ("How do I read a CSV file with pandas?", "How do I open a CSV file in Excel?"),
    ("What is a Roth IRA?", "What is an API?"),
    ("Why is the sky blue?", "Why is grass green?"),
    ("How long is a marathon?", "How long is a flight from London to New York?"),
    ("Write a short poem about the moon", "Write a short story about a dragon"),
    ("How often should I water a cactus?", "How often should I change my car's oil?"),
    ("What are the symptoms of dehydration?", "What are the side effects of caffeine?"),
    ("Do I need a visa to visit Japan from Canada?", "What is the best sushi in Tokyo?"),
    ("How do I end my membership?", "How do I cancel a flight booking?"),
    ("How is compound interest calculated?", "How is the volume of a cylinder calculated?"),
    ("turn off the kitchen lights", "How do I install a light switch?"),
    ("SELECT * FROM orders WHERE total > 100", "How many orders did we get last month?"),
)

PAIRS: tuple[Pair, ...] = (
    *_CODE,
    *_DATA,
    *_COOKING,
    *_TRAVEL,
    *_HEALTH,
    *_FINANCE,
    *_SCIENCE,
    *_SUPPORT,
    *_DEVICE,
    *_CHAT,
    *_HISTORY_GEOGRAPHY,
    *_HOME,
    *_SPORTS,
    *_WRITING,
    *_MATHS,
    *_MIXED,
)
