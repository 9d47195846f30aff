"""A value written after a word that names it, in any language (pure): the pattern shared by
the detectors that know a value by its label rather than its shape (credentials, record
numbers). "Passwort: Sommer2024", "NHC: 2843742", "Kundennummer 554213", "パスワード：abc123",
"비밀번호는 qwer1234", "my passcode is 99lions".

A key's closing quote may follow the label (`"phone": "..."`, a pasted JSON record). Between
the label and the value: a colon or equals sign (full-width too), "is" and its
translations, a topic particle; a few words may stand between (" for the portal", "(new)"). A
label in a script written without spaces needs no boundary before it ("ログインのパスワード").
RE2, case-insensitive in every script: linear in the text.
"""

from __future__ import annotations

from policies.re2text import Pattern, compile_unicode
from policies.scripts import unspaced

# (\s is written [\s]: policies/re2text.py gives it its Unicode meaning inside brackets only)
SEPARATOR = (
    r"(?:[\s]*[:=：＝][\s]*"
    r"|[\s]+(?:is|was|ist|war|es|est|era|é|è|er|är|on|jest|je|это|είναι)[\s]*:?[\s]*"
    r"|[\s]*(?:は|が|是|为|為|는|은)[\s]*)"
)
# Only a colon, an equals sign or a particle: for a label whose "is" starts prose as often as
# a value ("the address is still unknown")
COLON = r"(?:[\s]*[:=：＝][\s]*|[\s]*(?:は|는|은)[\s]*)"
# The separator, or only spaces (a number may follow its label so: "PIN 4821", "NHC 2843742")
SEPARATOR_OR_SPACE = rf"(?:{SEPARATOR}|[\s]+)"
_BETWEEN = (
    r"(?:[\s]*\([^()\n]{0,24}\)"
    r"|[\s]+(?:for|to|für|zu[mr]?|pour|para|per|of|del?|du|do|van|voor|för|til|na|для|від)"
    r"[\s]+[^\s]{1,24})?"
)
# Many labels, case-insensitive in every script, make a large automaton: RE2's default 8 MiB
# would have it fall back to its slower search on every text.
_MAX_MEM = 64 << 20
QUOTES = "\"'«»“”„‘’「」"


def labelled(labels: tuple[str, ...], value: str, separator: str = SEPARATOR) -> Pattern:
    """A pattern whose one group is `value` (a pattern) after one of `labels`."""
    spaced = [label for label in labels if not unspaced(label[0])]
    written_whole = [label for label in labels if unspaced(label[0])]
    before = [rf"(?:^|[^\w])(?:{_either(spaced)})"] if spaced else []
    before += [f"(?:{_either(written_whole)})"] if written_whole else []
    return compile_unicode(
        rf"(?i)(?:{'|'.join(before)})[{QUOTES}]?{_BETWEEN}{separator}[{QUOTES}]?({value})"
        rf"(?:[{QUOTES}]|[^\w]|$)",
        max_mem=_MAX_MEM,
    )


def _either(labels: list[str]) -> str:
    """The labels, longest first (so "pin code" is tried before "pin"), a space as any space,
    an underscore or a hyphen (a JSON key, a log's field: "licence_plate", "phone-number")."""
    return "|".join(sorted((label.replace(" ", r"[\s_-]") for label in labels), key=len)[::-1])
