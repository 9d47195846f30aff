"""Which scripts write words without spaces between them (Han, kana, Hangul syllables; Thai,
Lao, Myanmar and Khmer): where a word's edges cannot be found by spaces, rules read one
character as one word."""

from __future__ import annotations


def unspaced(char: str) -> bool:
    """A character of a script that writes words without spaces."""
    code = ord(char)
    return (
        0x3040 <= code <= 0x30FF  # hiragana, katakana
        or 0x3400 <= code <= 0x4DBF
        or 0x4E00 <= code <= 0x9FFF  # Han
        or 0xF900 <= code <= 0xFAFF
        or 0xAC00 <= code <= 0xD7A3  # Hangul syllables
        or 0x20000 <= code <= 0x2FA1F
        or 0x31F0 <= code <= 0x31FF
        or 0x0E00 <= code <= 0x0EFF  # Thai, Lao
        or 0x1000 <= code <= 0x109F  # Myanmar
        or 0x1780 <= code <= 0x17FF  # Khmer
    )
