"""The word tables behind cache/guard.py: what counts as a number, a unit, a negation, a name, and
which words contrast. Plain data; guard.py builds one look-up dict from it at import.

Contrast sets are written "member | member | ...", each member "canonical synonym ...": two
questions conflict when both use a set and the members differ ("turn on" vs "turn off"), while
synonyms ("biggest" / "largest") and one-sided use ("put on some jazz" vs "play some jazz") pass.
Verb and plural forms are generated, so "lock" covers "locked" and "locking". A set marked "!"
is strict: using it on one side only is a conflict too ("the capital" vs "the largest city").
"""

from __future__ import annotations

NUMBERS = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
    "thirteen": 13,
    "fourteen": 14,
    "fifteen": 15,
    "sixteen": 16,
    "seventeen": 17,
    "eighteen": 18,
    "nineteen": 19,
    "twenty": 20,
    "thirty": 30,
    "forty": 40,
    "fifty": 50,
    "sixty": 60,
    "seventy": 70,
    "eighty": 80,
    "ninety": 90,
}
SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9, "dozen": 12}
# Numbers that stand alone, never part of "twenty-one": "twice" = "two times", "x squared" = "x^2".
ALONE = {"twice": 2, "thrice": 3, "squared": 2, "cubed": 3}

ORDINALS = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
    "eleventh": 11,
    "twelfth": 12,
    "twentieth": 20,
    "thirtieth": 30,
    "hundredth": 100,
}

# An unstated 1: "a mile" = "1 mile" = "one mile"; "per day" = "a day".
SOFT_ONE = "one a an single per each"

NEGATIONS = (
    "not no never cannot without except neither nor none nobody nothing nowhere excluding "
    "dont doesnt didnt isnt arent wasnt werent cant couldnt shouldnt wouldnt wont havent hasnt "
    "hadnt mustnt neednt aint"
)

# "canonical: form ..."; "~form" is a unit only right after a number ("5 m", "7 am", "10 min").
# Plurals of the other forms are generated.
UNITS = (
    "km: km kilometre kilometer kms",
    "metre: metre meter ~m",
    "cm: cm centimetre centimeter",
    "mm: mm millimetre millimeter",
    "mile: mile ~mi",
    "foot: foot feet ft",
    "inch: inch inches",
    "yard: yard yd",
    "kg: kg kilogram kilo kgs",
    "gram: gram ~g ~gr",
    "mg: mg milligram",
    "lb: pound lb lbs",
    "oz: ounce oz",
    "tonne: tonne ton",
    "litre: litre liter ~l",
    "ml: ml millilitre milliliter",
    "cup: cup",
    "tbsp: tablespoon tbsp",
    "tsp: teaspoon tsp",
    "gallon: gallon ~gal",
    "pint: pint",
    "quart: quart",
    "celsius: celsius centigrade ~c",
    "fahrenheit: fahrenheit ~f",
    "kelvin: kelvin",
    "degree: degree ~deg",
    "mph: mph",
    "kmh: kmh",
    "mps: mps",
    "knot: knot",
    "second: seconds ~second ~sec ~secs ~s",
    "minute: minute ~min ~mins",
    "hour: hour ~hr ~hrs ~h",
    "day: day",
    "week: week",
    "fortnight: fortnight",
    "month: month",
    "year: year ~yr ~yrs",
    "decade: decade",
    "century: century centuries",
    "am: ~am ~a.m",
    "pm: ~pm ~p.m",
    "percent: percent percentage pct",
    "usd: dollar usd bucks",
    "eur: euro eur",
    "gbp: gbp quid sterling",
    "byte: byte ~b",
    "kb: kilobyte ~kb",
    "mb: megabyte ~mb",
    "gb: gigabyte ~gb",
    "tb: terabyte ~tb",
    "calorie: calorie kcal ~cal",
    "watt: watt ~w",
    "kwh: kwh",
    "volt: volt ~v",
    "amp: ampere ~amp",
    "hertz: hertz hz",
    "psi: psi",
    "mmhg: mmhg",
    "pixel: pixel px",
)

# Names that users often write in lowercase ("capital of france"); capitalised words, code and
# identifiers are names anyway. A name on one side only is a conflict: "a python list" and "a
# list" may not deserve the same answer.
ENTITIES = (
    # programming languages, tools, formats
    "python javascript typescript java kotlin scala rust golang ruby php perl haskell elixir "
    "erlang clojure lua dart cplusplus csharp fsharp html css sql bash powershell matlab fortran "
    "cobol react vue angular django flask fastapi numpy pandas scipy matplotlib pytorch "
    "tensorflow keras docker kubernetes git github gitlab linux ubuntu debian macos android ios "
    "iphone ipad postgresql mysql sqlite mongodb redis excel npm pip conda aws azure nginx json "
    "yaml xml csv boto3 jquery",
    # natural languages
    "english spanish french german italian portuguese japanese chinese mandarin cantonese "
    "korean russian arabic hindi bengali urdu dutch swedish norwegian danish finnish polish greek "
    "latin hebrew vietnamese thai indonesian",
    # places
    "france germany spain italy portugal japan china india brazil argentina mexico canada "
    "australia russia egypt nigeria kenya england scotland ireland wales britain sweden norway "
    "denmark finland poland greece netherlands holland belgium switzerland austria ukraine iran "
    "iraq israel pakistan bangladesh indonesia vietnam thailand korea peru chile colombia "
    "venezuela cuba ethiopia morocco singapore africa europe asia antarctica oceania america "
    "london paris berlin madrid rome tokyo osaka beijing shanghai delhi mumbai sydney melbourne "
    "toronto moscow cairo dubai chicago boston seattle amsterdam dublin vienna prague lisbon "
    "barcelona istanbul seoul bangkok",
    # planets, elements
    "mercury venus mars jupiter saturn uranus neptune pluto hydrogen helium lithium carbon "
    "nitrogen oxygen sodium magnesium aluminium silicon phosphorus sulfur chlorine potassium "
    "calcium iron copper zinc silver tin platinum gold uranium iodine",
    # medicines, illnesses, what people drink
    "ibuprofen paracetamol aspirin naproxen codeine morphine amoxicillin penicillin metformin "
    "insulin warfarin statin melatonin antihistamine omeprazole prednisone flu covid measles "
    "chickenpox malaria asthma diabetes coffee tea alcohol caffeine nicotine",
    # animals, sports, music
    "cat dog horse rabbit hamster parrot goldfish football soccer hockey basketball baseball "
    "tennis cricket rugby golf jazz blues rock reggae techno",
)
# Looked up after lowercasing, before anything else: one key for one name.
ALIASES = {
    "tv": "television",
    "js": "javascript",
    "py": "python",
    "postgres": "postgresql",
    "acetaminophen": "paracetamol",
    "tylenol": "paracetamol",
    "panadol": "paracetamol",
    "advil": "ibuprofen",
    "nurofen": "ibuprofen",
    "motrin": "ibuprofen",
    "influenza": "flu",
    "aluminum": "aluminium",
    "sulphur": "sulfur",
    "mt": "mount",
    "sept": "september",
}
# A single letter after these names something: "vitamin d", "type a", "plan b".
LETTER_NAMES = frozenset(
    "vitamin type plan option grade class section part hepatitis size model".split()
)
# Capitalised in the middle of a sentence, yet no name.
NOT_NAMES = frozenset(
    "i i'm i've i'd i'll ok okay hi hello hey please thanks thank dear yes no pls plz sorry".split()
)
# Before a duration, these say what it is: a delay ("in"), a length ("for"), a period ("every").
TIMINGS = frozenset("in for every within after before by until".split())
# Skipped when reading "X to Y": "a string to an integer" -> (string, integer).
SKIPPED = frozenset("a an the my your his her its our their this that these those some any".split())

# Applied to the raw text first, so that the tokenizer sees words. Symbols: "°C" -> "celsius",
# "17 x 23" -> "17 times 23" (x, *, /, +, ^ and minus only between numbers).
SYMBOLS = {
    "°c": " celsius",
    "°f": " fahrenheit",
    "°": " degrees",
    "%": " percent",
    "x": " times ",
    "×": " times ",
    "*": " times ",
    "÷": " divided by ",
    "/": " divided by ",
    "+": " plus ",
    "^": " power ",
    "-": " minus ",
    "−": " minus ",
}
SYMBOL_PATTERN = (
    r"°\s*[cCfF]\b|°|%|(?<=\d)\s*[x×*÷/+^−]\s*(?=\d)|(?<=\d)\s+-\s+(?=\d)|\s[+^]\s|(?<=\w)\^"
)
# Words, at a word boundary: (name, pattern, replacement). Case-sensitive unless marked (?i:).
WORDS = (
    (
        "kmh",
        r"(?i:km\s*/\s*h(?:r|our)?\b|kilomet(?:re|er)s?\s+(?:per|an|a)\s+hour\b|kph\b)",
        " kmh",
    ),
    ("mph", r"(?i:miles?\s+(?:per|an|a)\s+hour\b)", " mph"),
    ("mps", r"(?i:m\s*/\s*s\b|met(?:re|er)s?\s+per\s+second\b)", " mps"),
    ("percent", r"(?i:per\s+cent\b)", " percent"),
    ("cplusplus", r"(?i:c\+\+)", " cplusplus "),
    ("csharp", r"(?i:c#)", " csharp "),
    ("fsharp", r"(?i:f#)", " fsharp "),
    ("us", r"U\.S\.(?:A\.)?|USA?\b", " United States "),
    ("uk", r"U\.K\.|UK\b", " United Kingdom "),
    ("ww2", r"WW(?:II|2)\b", " World War II "),
    ("ww1", r"WW(?:I|1)\b", " World War I "),
    ("mt", r"Mt\.(?=\s)", "Mount"),  # not a full stop: "Mt. Everest" goes on
)

CONTRASTS = (
    # commands and their opposites
    "on | off",
    "open | close shut",
    "lock | unlock",
    "enable activate | disable deactivate",
    "start begin launch | stop end finish halt",
    "play resume unpause | pause",
    "increase raise up louder brighten boost | decrease lower reduce down quieter dim",
    "upload | download",
    "import | export",
    "push | pull",
    "read | write wrote written",
    "add insert append create | remove delete drop",
    "split | join merge combine concatenate",
    "encode | decode",
    "encrypt | decrypt",
    "compress zip | decompress unzip extract",
    "ascending asc | descending desc",
    "max maximum | min minimum",
    "include | exclude",
    "upgrade | downgrade",
    "subscribe | unsubscribe",
    "install | uninstall",
    "connect | disconnect",
    "arm | disarm",
    "mute | unmute",
    "cancel | renew | pause suspend",
    "login | logout",
    "accept approve | decline reject refuse deny",
    "allow permit | block forbid ban",
    "win won | lose lost",
    "buy bought purchase | sell sold",
    "send sent | receive",
    "lend | borrow",
    "arrive arrival | leave depart departure",
    "prevent | cause",
    # degrees and comparisons
    "!largest biggest greatest | smallest tiniest | longest | shortest | tallest highest"
    " | lowest | deepest | shallowest | oldest | newest youngest latest | fastest quickest"
    " | slowest | hottest warmest | coldest | closest nearest | farthest furthest | best | worst"
    " | cheapest | heaviest | lightest | richest | poorest",
    "more greater | less fewer | bigger larger | smaller | longer | shorter | higher taller"
    " | lower | faster quicker | slower | older | younger newer | better | worse | hotter warmer"
    " | colder cooler | heavier | lighter | cheaper | stronger | weaker | easier | harder",
    "most | least fewest",
    "high | low",
    "above over | below under beneath",
    "early | late",
    "long | short",
    "good | bad",
    "cheap | expensive",
    "fast quick | slow",
    "big large | small little tiny",
    "old | new young",
    "full | empty",
    "wet | dry",
    "happy | sad",
    "love | hate",
    "mild minor | moderate | severe serious major",
    "junior | senior",
    "hot warm heat heating heater | cold cool cooling chilly",
    "boil | freeze froze frozen | melt",
    "free | paid premium",
    "simple | compound",
    "positive | negative",
    "true | false",
    "even | odd",
    "valid | invalid",
    "legal | illegal",
    "formal | informal casual",
    "visible show | hidden hide invisible",
    "public | private",
    "online | offline",
    "domestic domestically | international internationally abroad",
    "synchronous sync | asynchronous async",
    "static | dynamic",
    "mutable | immutable",
    "local | remote",
    "global | local",
    "internal | external",
    "input | output",
    "client | server",
    "key | value",
    "row | column | index",
    "list | tuple | set | dict dictionary | array | string str | integer int | float"
    " | boolean bool",
    "synonym | antonym",
    "singular | plural",
    "prefix | suffix",
    "vowel | consonant",
    "uppercase upper | lowercase lower",
    "pros advantage benefit | cons disadvantage drawback",
    # time
    "before prior | after | during while | within",
    "yesterday | today tonight now | tomorrow | last previous | next",
    "past | present | future",
    "morning | afternoon | evening | night",
    "sunrise dawn | sunset dusk",
    "monday | tuesday | wednesday | thursday | friday | saturday | sunday",
    "january | february | march | april | june | july | august | september | october"
    " | november | december",
    "spring | summer | autumn fall | winter",
    "monthly | annual annually yearly | weekly | daily | hourly",
    "breakfast | brunch | lunch | dinner supper",
    # place, people, things
    "north northern | south southern | east eastern | west western",
    "left | right",
    "front | back rear",
    "upstairs | downstairs",
    "inside indoor indoors | outside outdoor outdoors",
    "top | bottom",
    "horizontal horizontally | vertical vertically",
    "kitchen | bedroom | bathroom | living lounge | dining | garage | office | hallway hall"
    " | basement | attic | garden | porch | patio | nursery | laundry",
    "male man men | female woman women",
    "mother mom mum | father dad",
    "brother | sister",
    "son | daughter",
    "husband | wife",
    "boy | girl",
    "boyfriend | girlfriend",
    "adult grownup | child children kid | baby infant toddler | teen teenager adolescent"
    " | elderly senior",
    "red | orange | yellow | green | blue | purple violet | pink | black | white | grey gray"
    " | brown",
    "rainy rain | sunny | snowy snow | cloudy | windy",
    # maths
    "add plus sum | subtract minus | multiply times multiplied | divide divided quotient",
    "square | cube",
    "sin sine | cos cosine | tan tangent",
    "mean average | median | mode",
    "area | perimeter circumference | volume",
    "derivative differentiate | integral integrate",
)
