"""Spelled-out e-mail addresses and digits, rewritten as the symbols they stand for (pure).

People write an address so that scrapers miss it ("jsmith at gmail dot com", "j.smith(at)firma
(punkt)de", "jsmith собака mail точка ru") and a phone or ID number the way it is read out ("five
five five, one two three, four five six seven", "null eins sieben neun", "〇九〇一二三四"). The
detectors in policies/pii.py look for "@" and digits; respelled() gives them the text with these
written as "@", "." and digits, to scan besides the text itself (it can only add findings).

A bare "at" is prose ("meet at noon"), so it counts only before a domain spelled with a dot-word
and a TLD of 2 to 24 letters; a bracketed or unambiguous at-word ("[at]", "arroba") may take a
literal dot. Digits are rewritten from a run of digit words of one language (at least four
digits: "double five" is two) or of CJK digit characters; a comma or hyphen between words, or
more than one space, splits the digits into groups, so a phone pattern still sees its groups.

This runs on text a client chose, mostly with nothing spelled in it: the text is cut at
LIMIT_CHARS, and one RE2 search (a DFA, linear) decides whether anything may be spelled at all.
Only then do Python's patterns look, each bounded (possessive or atomic repeats, labels of at
most 64 characters), so no search backtracks over more than a few words: linear in the text.
"""

from __future__ import annotations

import re
import unicodedata
from itertools import chain

from policies.re2text import compile_unicode, to_bytes

LIMIT_CHARS = 1_000_000

# The words for 0..9 (variants joined by "|"): num2words 0.5 for the languages it knows, run once
# offline, plus the forms used when reading digits out ("oh", "zwo", "meia", "공", "幺" ...).
DIGIT_WORDS: dict[str, str] = {
    "en": "zero|oh|nought one two three four five six seven eight nine",
    "de": "null eins zwei|zwo drei vier fünf|fuenf sechs sieben acht neun",
    "fr": "zéro un|une deux trois quatre cinq six sept huit neuf",
    "es": "cero uno|una dos tres cuatro cinco seis siete ocho nueve",
    "pt": "zero um|uma dois|duas três quatro cinco seis|meia sete oito nove",
    "it": "zero uno|una due tre quattro cinque sei sette otto nove",
    "nl": "nul één|een twee drie vier vijf zes zeven acht negen",
    "sv": "noll ett|en två tre fyra fem sex sju åtta nio",
    "da": "nul et|en to tre fire fem seks syv otte ni",
    "no": "null en|ett|én to tre fire fem seks syv|sju åtte ni",
    "fi": "nolla yksi kaksi kolme neljä viisi kuusi seitsemän kahdeksan yhdeksän",
    "tr": "sıfır bir iki üç dört beş altı yedi sekiz dokuz",
    "el": "μηδέν ένα δύο τρία τέσσερα πέντε έξι επτά|εφτά οκτώ|οχτώ εννέα|εννιά",
    "hi": "शून्य|ज़ीरो एक दो तीन चार पाँच|पांच छह|छः|छे सात आठ नौ",
    "ar": "صفر واحد اثنان|اثنين ثلاثة|ثلاث أربعة|أربع خمسة|خمس ستة|ست سبعة|سبع "
    "ثمانية|ثمان|ثماني تسعة|تسع",
    "fa": "صفر یک دو سه چهار پنج شش هفت هشت نه",
    "he": "אפס אחת|אחד שתיים|שתים|שניים שלוש|שלושה ארבע|ארבעה חמש|חמישה שש|שישה שבע|שבעה "
    "שמונה תשע|תשעה",
    "ru": "ноль|нуль один|одна|раз два|две три четыре пять шесть семь восемь девять",
    "uk": "нуль|ноль один|одна два|дві три чотири п'ять|п’ять|пʼять шість сім вісім "
    "дев'ять|дев’ять|девʼять",
    "bg": "нула едно|един|една две|два три четири пет шест седем осем девет",
    "pl": "zero jeden|jedna dwa|dwie trzy cztery pięć sześć siedem osiem dziewięć",
    "cs": "nula jedna|jeden dva|dvě tři čtyři pět šest sedm osm devět",
    "sk": "nula jeden|jedna dva|dve tri štyri päť šesť sedem osem deväť",
    "sl": "nič ena dve|dva tri štiri pet šest sedem osem devet",
    "sr": "nula|нула jedan|jedna|један dva|dve|два tri|три četiri|четири pet|пет šest|шест "
    "sedam|седам osam|осам devet|девет",
    "ro": "zero unu doi|două trei patru cinci șase|şase șapte|şapte opt nouă",
    "hu": "nulla egy kettő|két három négy öt hat hét nyolc kilenc",
    "lt": "nulis vienas du trys keturi penki šeši septyni aštuoni devyni",
    "lv": "nulle viens divi trīs četri pieci seši septiņi astoņi deviņi",
    "ca": "zero un|una dos tres quatre cinc sis set vuit nou",
    "id": "nol|kosong satu dua tiga empat lima enam tujuh delapan sembilan",
    "vi": "không một hai ba bốn năm sáu bảy tám chín",
    "th": "ศูนย์ หนึ่ง สอง สาม สี่ ห้า หก เจ็ด แปด เก้า",
    # written without spaces: a run of these characters, not of words
    "ja": "零|〇 一 二 三 四 五 六 七 八 九",
    "zh": "零|〇|○ 一|幺 二 三 四 五 六 七 八 九",
    "ko": "영|공 일 이 삼 사 오 육 칠 팔 구",
}
MULTIPLIERS = {"double": 2, "triple": 3}  # English: "double five" is 55
_HAN, _HANGUL = ("ja", "zh"), ("ko",)
# "@" in words. Unambiguous ones may stand before a literal dot; the others (prose words too)
# only before a spelled dot. CJK ones need no spaces around them.
AT_STRONG = """arroba arrova arobase arobas klammeraffe affenschwanz snabel-a snabela chiocciola
chiocciolina apenstaartje apestaartje zavináč zavinac miukumauku kissanhäntä krøllalfa krollalfa
grisehale""".split()
AT_WEAK = "at ät bei собака собачка sobaka małpa malpa kukac παπάκι papaki שטרודל एट แอท".split()
AT_CJK_STRONG, AT_CJK_WEAK = ["艾特", "アットマーク"], ["アット", "골뱅이", "앳"]
DOTS = """dot punkt punto ponto point punt piste pont kropka tečka tecka bodka pika tačka tacka
točka tocka taškas taskas punkts nokta τελεία τελεια точка крапка נקודה نقطة نقطه डॉट ดอท chấm
cham titik punct prikk""".split()
DOTS_CJK = ["ドット", "点", "點", "닷", "쩜"]

Trie = dict[str, "Trie"]


def _either(words: list[str]) -> str:
    """Any of `words`, as a regular expression shaped like a trie (a branch per first letter),
    so the engine tries a few letters at a position, not every word."""
    root: Trie = {}
    for word in words:
        node = root
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}
    return f"(?:{_branches(root)})"


def _branches(node: Trie) -> str:
    branches = [re.escape(char) + _branches(child) for char, child in sorted(node.items()) if char]
    if not branches:
        return ""
    body = branches[0] if len(branches) == 1 else f"(?:{'|'.join(branches)})"
    return f"(?:{body})?" if "" in node else body


def _plain(word: str) -> str:
    """A word without its accents (as often typed: "funf", "tres", "εξι"), Turkish ı as i."""
    bare = "".join(c for c in unicodedata.normalize("NFD", word) if not unicodedata.combining(c))
    return unicodedata.normalize("NFC", bare.replace("ı", "i"))


def _digit_table() -> dict[str, dict[str, int]]:
    """Each digit word (and its plain form, in the alphabets written with accents) -> the digit
    it is in each language that has it; multipliers are negative."""
    table: dict[str, dict[str, int]] = {word: {"en": -n} for word, n in MULTIPLIERS.items()}
    for lang, row in DIGIT_WORDS.items():
        for digit, slot in enumerate(row.split(" ")):
            for word in slot.split("|"):
                for form in {word, _plain(word) if ord(max(word)) < 0x700 else word}:
                    table.setdefault(form, {})[lang] = digit
    return table


_DIGIT_OF = _digit_table()
# the digits written without spaces
_CHARS_OF = {c: min(d.values()) for c, d in _DIGIT_OF.items() if {*_HAN, *_HANGUL} & d.keys()}

# The patterns run on lowered text (same length: İ is made i first). NFKC has made every other
# space " ", so _SP is a space or a tab, never a line break.
_SP = "[ \t]"
_CJK = r"\u3000-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_CH = rf"[^\W{_CJK}]"  # a letter or digit of an address
_LOCAL = rf"{_CH}(?:{_CH}|[%+\-]){{0,63}}+"
_LABEL = rf"{_CH}(?:{_CH}|-){{0,62}}+"
_TLD = rf"[^\W\d_{_CJK}]{{2,24}}(?!{_CH}|-)"
# After a plain "at", a top-level domain mail uses, never a word prose puts after "dot" ("look
# at the dot on the map", "... dot in the corner"): generic ones, and country codes.
_MAIL_TLDS = "com org net edu gov mil info biz io ai app dev co eu asia de uk fr ru jp cn br nl pl es ca au ch se dk fi cz sk hu ro bg gr tr ua kr tw hk sg mx ar cl pe za ng ke il ae sa ir pk vn th ph nz ie pt lu hr si rs lt lv ee kz".split()  # noqa: E501
_WEAK_TLD = rf"(?:{'|'.join(_MAIL_TLDS)})(?!{_CH}|-)"
_OPEN, _CLOSE = r"[\[({<]", r"[\])}>]"
_AT_ALL = [*AT_STRONG, *AT_WEAK, *AT_CJK_STRONG, *AT_CJK_WEAK, "@"]


def _bracketed(words: str) -> str:
    return rf"{_SP}{{0,3}}{_OPEN}{_SP}{{0,3}}{words}{_SP}{{0,3}}{_CLOSE}{_SP}{{0,3}}"


def _spaced(words: list[str], cjk: list[str]) -> str:
    """Words with spaces around them, CJK ones with or without."""
    return rf"{_SP}{{1,3}}{_either(words)}{_SP}{{1,3}}|{_SP}{{0,3}}{_either(cjk)}{_SP}{{0,3}}"


_DOT_SPELLED = rf"(?>{_bracketed(_either([*DOTS, *DOTS_CJK, '.']))}|{_spaced(DOTS, DOTS_CJK)})"
_DOT_ANY = rf"(?>{_DOT_SPELLED}|{_SP}{{0,2}}\.{_SP}{{0,2}})"
_AT_STRONG = (
    rf"(?>{_bracketed(_either(_AT_ALL))}|{_SP}{{1,3}}@{_SP}{{0,3}}|@{_SP}{{1,3}}"
    rf"|{_spaced(AT_STRONG, AT_CJK_STRONG)})"
)
_AT_WEAK = rf"(?>{_spaced(AT_WEAK, AT_CJK_WEAK)})"
_DOMAIN = rf"{_LABEL}(?:{_DOT_ANY}{_LABEL}){{0,7}}"
# Not the "john dot smith" of "me at john dot smith at gmail dot com": an address follows.
_NOT_BEFORE_ADDRESS = rf"(?!(?:{_AT_STRONG}|{_AT_WEAK}){_DOMAIN}{_DOT_SPELLED})"
_MAIL = (
    rf"(?<!{_CH}|[.%+\-])(?P<mail>{_LOCAL}(?:(?:\.|{_DOT_SPELLED}){_LOCAL}){{0,7}}+"
    rf"(?:{_AT_STRONG}{_DOMAIN}{_DOT_ANY}{_TLD}|{_AT_WEAK}{_DOMAIN}{_DOT_SPELLED}{_WEAK_TLD})"
    rf"{_NOT_BEFORE_ADDRESS})"
)
# What a digit word may not touch: letters, digits, and the marks of Indic, Thai, Hebrew and
# Arabic words (no letters to \w).
_W = r"[\w\u0300-\u036f\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0670\u0900-\u0dff\u0e00-\u0e7f]"
_WORDS_OF = {
    lang: [word for word, langs in _DIGIT_OF.items() if lang in langs]
    for lang in {lang for langs in _DIGIT_OF.values() for lang in langs} - {*_HAN, *_HANGUL}
}
_WORDS = sorted({word for words in _WORDS_OF.values() for word in words})
_DIGIT = rf"(?<!{_W}){_either(_WORDS)}(?!{_W})"
_FIRST = rf"(?<!{_W})(?!oh(?!{_W})){_either(_WORDS)}(?!{_W})"  # "Oh, one ..." is no zero
_DASH = ",\\-\u2010-\u2015"  # comma, hyphen, dashes
_SEP = rf"(?>{_SP}{{0,3}}[{_DASH}]{_SP}{{0,3}}|{_SP}{{1,3}})"
_CJK_SEP = rf"(?>{_SP}{{0,3}}[{_DASH}、ー]{_SP}{{0,3}}|{_SP}{{1,3}})"
_HAN_DIGITS = "".join(sorted(set(DIGIT_WORDS["ja"] + DIGIT_WORDS["zh"]) - set(" |")))
_HANGUL_DIGITS = "".join(sorted(set(DIGIT_WORDS["ko"]) - set(" |")))


def _chars_run(chars: str) -> str:
    return rf"[{chars}](?:{_CJK_SEP}?[{chars}]){{3,}}"


_CANDIDATE = re.compile(
    rf"{_MAIL}|(?P<words>{_FIRST}(?:{_SEP}{_DIGIT}){{2,}}+)"
    rf"|(?P<han>{_chars_run(_HAN_DIGITS)}+)"
    rf"|(?<!\w)(?P<hangul>{_chars_run(_HANGUL_DIGITS)}+)(?!\w)"  # whole Korean words
)
_MARK = re.compile(rf"(?P<at>{_AT_STRONG}|{_AT_WEAK})|{_DOT_ANY}")
_WORD_SEP = re.compile(rf"({_SEP})")
_NOT_DIGIT = re.compile(rf"(?:{_CJK_SEP})+")
# The quick check, on RE2 (a DFA: a megabyte in milliseconds), from the same pieces: what
# _CANDIDATE finds and more (no lookaround), but three digit words in a row of one language.
_ONE_LANGUAGE = "|".join(rf"{_either(w)}(?:{_SEP}{_either(w)}){{2}}" for w in _WORDS_OF.values())
_QUICK = compile_unicode(
    rf"{_AT_STRONG}|{_SP}{_either(AT_WEAK)}{_SP}+[\w%+\-]+(?:{_DOT_ANY}[\w%+\-]+)*{_DOT_SPELLED}"
    rf"|{_either(AT_CJK_WEAK)}|(?:^|[^\w\p{{M}}])(?:{_ONE_LANGUAGE})(?:$|[^\w\p{{M}}])"
    rf"|{_chars_run(_HAN_DIGITS)}|{_chars_run(_HANGUL_DIGITS)}".replace("(?>", "(?:")
)


def respelled(text: str) -> str | None:
    """`text` (NFKC) with spelled-out e-mail addresses and digits written as such; None when
    nothing in it is spelled out. Text past LIMIT_CHARS is left out."""
    text = text[:LIMIT_CHARS]
    low = text.replace("\u0130", "i").lower()  # İ is the one letter lower() makes two
    if _QUICK.search(to_bytes(low)) is None or (found := _CANDIDATE.search(low)) is None:
        return None
    pieces: list[str] = []
    end = 0
    for match in chain((found,), _CANDIDATE.finditer(low, found.end())):
        start, stop = match.span()
        rewrite = {"mail": _address, "words": _words}.get(match.lastgroup or "", _chars)
        pieces += (text[end:start], rewrite(text[start:stop], low[start:stop]))
        end = stop
    out = "".join([*pieces, text[end:]])
    return None if out == text else out


def _address(written: str, low: str) -> str:
    """local@domain.tld: each at-form and dot-form becomes its symbol, labels stay as written."""
    pieces: list[str] = []
    end = 0
    for mark in _MARK.finditer(low):
        pieces += (written[end : mark.start()], "@" if mark.group("at") else ".")
        end = mark.end()
    return "".join([*pieces, written[end:]])


def _words(written: str, low: str) -> str:
    """A run of digit words, cut where the language changes; each piece of one language with
    four digits or more becomes digits, the others stay as written."""
    parts, keys = _WORD_SEP.split(written), _WORD_SEP.split(low)
    words = keys[0::2]
    out: list[str] = []
    first = 0
    while first < len(words):
        last, lang = _one_language(words, first)
        out.append(_digits(parts[2 * first : 2 * last - 1], keys[2 * first : 2 * last - 1], lang))
        if last < len(words):
            out.append(parts[2 * last - 1])
        first = last
    return "".join(out)


def _one_language(words: list[str], first: int) -> tuple[int, str]:
    """Where the words from `first` stop sharing a language, and that language. A multiplier
    ends the piece unless the next word is a digit of the same language."""
    langs = set(_DIGIT_OF[words[first]])
    last = first + 1
    while last < len(words) and (common := langs & _DIGIT_OF[words[last]].keys()):
        if _DIGIT_OF[words[last]].get("en", 0) < 0 and not (
            last + 1 < len(words) and common & _DIGIT_OF[words[last + 1]].keys()
        ):
            break
        langs, last = common, last + 1
    return last, min(langs)


def _digits(parts: list[str], keys: list[str], lang: str) -> str:
    groups: list[str] = []
    group, times = "", 1
    for index in range(0, len(keys), 2):
        value = _DIGIT_OF[keys[index]][lang]
        if value < 0:
            times = -value
            continue
        group += str(value) * times
        times = 1
        sep = keys[index + 1] if index + 1 < len(keys) else ""
        if sep and sep not in (" ", "\t", "-"):
            groups.append(group)
            group = ""
    groups.append(group)
    if sum(map(len, groups)) < 4 or times > 1:
        return "".join(parts)
    return " ".join(groups)


def _chars(written: str, low: str) -> str:
    """A run of CJK digits: its groups, or one number when each group is one digit. Groups of
    two at most are words ("일이", "사이"), not digits: they stay as written."""
    groups = ["".join(str(_CHARS_OF[c]) for c in g) for g in _NOT_DIGIT.split(low) if g]
    longest = max(map(len, groups))
    return "".join(groups) if longest == 1 else " ".join(groups) if longest > 2 else written
