"""cache/guard.py: conflict() refuses a semantic hit when something critical differs, in either
direction, and says why; true paraphrases pass."""

from __future__ import annotations

import pytest

from cache.guard import compare, conflict, features

# (cached, new): the same question, so the cached answer must be allowed.
PARAPHRASES = [
    # politeness, reordering, casing, typos, contractions
    ("Lock the front door", "please lock the front door"),
    ("How do I reverse a list in Python?", "how to reverse a python list"),
    ("Who painted the Mona Lisa?", "who painted the mona lisa"),
    ("TURN OFF THE BEDROOM LIGHTS", "turn off the bedroom lights"),
    ("How To Reverse A List In Python", "how do I reverse a list in Python"),
    ("What is the capital of France?", "what's france's capital city"),
    ("I can't log in to my account", "I cannot log into my account"),
    ("How do I revese a list in Python?", "How do I reverse a list in Python?"),
    ("Python: how do I read a file?", "How do I read a file in Python?"),
    ("Hi! Can you tell me a fun fact about octopuses?", "tell me a fun fact about octopuses"),
    # numbers written differently
    ("How many kilometres are in 5 miles?", "Convert five miles to km"),
    ("What is 1,000 divided by 8?", "1000 / 8 = ?"),
    ("what is 3.0 times 4", "What is 3 times 4?"),
    ("Is 97 a prime number?", "is ninety-seven prime?"),
    ("How many feet are in a mile?", "How many ft in 1 mile?"),
    ("How many seconds are in a day?", "how many seconds in one day"),
    ("What is 105 squared?", "what is one hundred and five squared"),
    ("What is 17 times 23?", "whats 17 x 23"),
    ("What's the derivative of x squared?", "What is the derivative of x^2?"),
    ("I was charged twice for the same order", "I've been billed two times for one order"),
    ("Set a timer for 10 minutes", "start a ten minute timer"),
    # units and symbols
    ("Convert 100 degrees Fahrenheit to Celsius", "What is 100°F in °C?"),
    ("What is 15% of 80?", "what is fifteen percent of 80"),
    ("Convert 30 mph to km/h", "What is 30 miles per hour in kilometres per hour?"),
    ("Set the oven to 180 degrees Celsius", "preheat the oven to 180°C"),
    ("Set an alarm for 7 am", "wake me up at 7am"),
    # synonyms inside a contrast set, and one-sided use of one
    ("What is the largest ocean on Earth?", "Which ocean is the biggest on Earth?"),
    ("Turn the TV volume up", "increase the volume on the TV"),
    ("Write a haiku about autumn", "Write me a haiku about fall"),
    ("Play some jazz in the bedroom", "put on some jazz music in the bedroom"),
    ("Turn on the living room lights", "switch the living room lights on"),
    # names: written alike, aliased, or in code
    ("How tall is Mount Everest?", "What is the height of Mt. Everest?"),
    ("Who was the first president of the United States?", "Who was the first US president?"),
    ("When did World War II end?", "What year did WWII end?"),
    ("Mute the TV", "mute the television"),
    ("What does the `yield` keyword do in Python?", "what does yield do in python"),
    ("How do I install numpy with pip?", "What's the pip command to install NumPy?"),
    ("Is it OK to take paracetamol with food?", "Can I take acetaminophen with food?"),
    ("How do I say 'thank you' in Japanese?", "How do you say thank you in Japanese?"),
    ("Connect to the Wi-Fi", "connect to the wifi"),
]

# (cached, new, what the reason starts with): another question, another answer.
NEAR_MISSES = [
    # numbers
    ("What is 17 times 23?", "What is 17 times 24?", "numbers differ: 23 vs 24"),
    ("How many kilometres are in 5 miles?", "How many kilometres are in 50 miles?", "numbers"),
    ("Give me three ideas for a gift", "Give me five ideas for a gift", "numbers differ: 3 vs 5"),
    ("What is 0.5 as a percentage?", "What is 0.05 as a percentage?", "numbers"),
    ("What's the population of Spain?", "What was the population of Spain in 1900?", "numbers"),
    ("What is 3 squared?", "What is 3 cubed?", "numbers"),
    ("What is 100 divided by 4?", "What is 4 divided by 100?", "number orders differ"),
    ("What's 2 to the power of 10?", "What's 10 to the power of 2?", "number orders"),
    # units and quantities
    ("How many grams are in a pound?", "How many grams are in an ounce?", "units differ"),
    ("Set an alarm for 7 am", "Set an alarm for 7 pm", "units differ: am vs pm"),
    ("Set the oven to 180 degrees Celsius", "Set the oven to 180 degrees Fahrenheit", "units"),
    ("Convert 5 km to miles", "Convert 5 miles to km", "quantities differ: 5 km vs 5 mile"),
    ("What is 15% of 80?", "What is 80% of 15?", "number orders"),
    ("Turn on the lights in 5 minutes", "Turn on the lights for 5 minutes", "timings differ"),
    # ordinals
    ("Who was the first president?", "Who was the second president?", "ordinals differ"),
    ("Summarise the 3rd chapter", "Summarise the 4th chapter", "ordinals differ"),
    # negation
    (
        "Is it safe to take ibuprofen with food?",
        "Is it safe to take ibuprofen without food?",
        "negation differs",
    ),
    ("What happens if I don't renew?", "What happens if I renew?", "negation differs"),
    ("Does it support Windows?", "Doesn't it support Windows?", "negation differs"),
    # opposite and contrasting words
    (
        "Turn on the living room lights",
        "Turn off the living room lights",
        "opposite words: on vs off",
    ),
    ("Turn off the lights on the porch", "Turn on the lights on the porch", "opposite words"),
    ("Lock the front door", "Unlock the front door", "opposite words"),
    ("Sort the list in ascending order", "Sort the list in descending order", "opposite words"),
    ("What is the maximum dose?", "What is the minimum dose?", "opposite words"),
    ("Can I change it before ordering?", "Can I change it after ordering?", "opposite words"),
    ("Plan a workout for today", "Plan a workout for tomorrow", "opposite words"),
    ("How do I upload a file to S3?", "How do I download a file from S3?", "opposite words"),
    ("Turn off the kitchen light", "Turn off the bedroom light", "opposite words"),
    ("Is shipping free over $50?", "Is shipping free under $50?", "opposite words"),
    ("Arm the security system", "Disarm the security system", "opposite words"),
    (
        "What is the capital of Australia?",
        "What is the largest city in Australia?",
        "opposite words: - vs largest",
    ),
    # names
    (
        "What is the capital of France?",
        "What is the capital of Germany?",
        "entities differ: France vs Germany",
    ),
    ("what is the capital of france", "what is the capital of germany", "entities differ"),
    ("How do I reverse a list in Python?", "How do I reverse a list in JavaScript?", "entities"),
    ("How do I declare a constant in Rust?", "How do I declare a constant in Go?", "entities"),
    ("How do I reverse a list?", "How do I reverse a list in Rust?", "entities differ: - vs Rust"),
    ("What's the dose of vitamin D?", "What's the dose of vitamin C?", "entities differ: D vs C"),
    ("When did World War I end?", "When did World War II end?", "entities differ"),
    ("What does `git pull` do?", "What does `git fetch` do?", "entities differ: pull vs fetch"),
    ("Does `list.sort()` return a list?", "Does `sorted()` return a list?", "entities differ"),
    ("What does os.path.join do?", "What does os.path.split do?", "entities differ"),
    ("Rename my_table in SQL", "Rename my_view in SQL", "entities differ"),
    ("Can I take ibuprofen with paracetamol?", "Can I take ibuprofen with aspirin?", "entities"),
    # quoted text
    ("Define the word 'affect'", "Define the word 'effect'", "quoted texts differ"),
    ('Translate "good morning" into Spanish', 'Translate "bonjour" into Spanish', "quoted texts"),
    # direction
    (
        "How do I convert a string to an integer in Java?",
        "How do I convert an integer to a string in Java?",
        "direction reversed",
    ),
    (
        "How long should I wait to swim after eating?",
        "How long should I wait to eat after swimming?",
        "direction reversed",
    ),
]


@pytest.mark.parametrize(("cached", "new"), PARAPHRASES)
def test_paraphrases_pass_both_ways(cached: str, new: str) -> None:
    assert conflict(cached, new) is None
    assert conflict(new, cached) is None


@pytest.mark.parametrize(("cached", "new", "reason"), NEAR_MISSES)
def test_near_misses_are_refused_both_ways(cached: str, new: str, reason: str) -> None:
    forward, backward = conflict(cached, new), conflict(new, cached)
    assert forward is not None
    assert forward.startswith(reason), forward
    assert backward is not None, f"{new!r} -> {cached!r} passed"
    assert backward.split(":")[0] == forward.split(":")[0]


@pytest.mark.parametrize("text", [pair[0] for pair in PARAPHRASES + NEAR_MISSES])
def test_a_question_never_conflicts_with_itself(text: str) -> None:
    assert conflict(text, text) is None


def test_reasons_name_both_sides_cached_first() -> None:
    assert conflict("5 miles in km", "50 miles in km") == "numbers differ: 5 vs 50"
    assert (
        conflict("the weather in Paris", "the weather in Rome") == "entities differ: Paris vs Rome"
    )
    assert conflict("turn the fan on", "turn the fan off") == "opposite words: on vs off"
    assert conflict("Does it rain?", "Doesn't it rain?") == "negation differs: - vs doesn't"


def test_numbers_in_words_and_digits_are_one_number() -> None:
    assert features("twenty-one thousand and five").numbers == (21005.0,)
    assert features("1,000 or 3.0 or .5 or a dozen").numbers == (1000.0, 3.0, 0.5, 12.0)
    assert features("combine them into one").numbers == ()  # a lone "one" is soft
    assert conflict("one cup of flour", "two cups of flour") == "numbers differ: - vs 2"


def test_compare_is_conflict_on_features_kept_from_before() -> None:
    cached = features("Turn on the kitchen light")
    assert compare(cached, features("switch the kitchen light on")) is None
    assert compare(cached, features("Turn off the kitchen light")) == "opposite words: on vs off"


def test_a_long_text_is_judged_like_a_short_one() -> None:
    """A long question (what a chat client sends) is judged on what differs, wherever it is.
    What it costs (tens of microseconds a pair) is bench/semantic.py's to measure; a blow-up,
    such as a regex that backtracks, would show here as a hang, which pytest's timeout ends."""
    long = (
        "Please explain how I can configure nginx on Ubuntu 22.04 so that /api goes to 8080. " * 8
    )
    assert conflict(long, long + " Thanks!") is None
    changed = conflict(long, long.replace("8080", "8081"))
    assert changed is not None
    assert changed.startswith("numbers differ: 8080")


def test_the_policy_threshold_without_the_verifier_is_the_measured_one() -> None:
    from cache.guard import DEFAULT_THRESHOLD
    from policies.model import UNVERIFIED_SEMANTIC_THRESHOLD

    assert UNVERIFIED_SEMANTIC_THRESHOLD == DEFAULT_THRESHOLD
