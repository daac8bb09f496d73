"""The Porter stemmer exactly as SQLite's FTS5 `porter` tokenizer applies it.

Lexical statistics are kept per namespace by the store itself (`lexicon`), so the
stems must be computed in Python; they follow FTS5's rules, quirks included (a `y`
counts as a vowel anywhere but first in the `*v*` test; tokens under 3 or over 64
bytes pass through), so a word stems here as it would in an FTS5 index
(tests/unit/test_lexicon.py compares the two). The rules work on UTF-8 bytes, as
FTS5's do: a non-ASCII byte is a consonant and never part of a suffix.
"""

from __future__ import annotations

from collections.abc import Callable

MAX_STEMMED_BYTES = 64
_VOWELS = frozenset("aeiou")


def _consonants(stem: str) -> list[bool]:
    """Whether each letter is a consonant; `y` is one unless it follows a consonant."""
    flags: list[bool] = []
    previous = False
    for c in stem:
        previous = not (c in _VOWELS or (previous and c == "y"))
        flags.append(previous)
    return flags


def _measure(stem: str) -> int:
    """Porter's m: how many vowel-consonant sequences follow the leading consonants."""
    m = 0
    seen_vowel = False
    for consonant in _consonants(stem):
        if not consonant:
            seen_vowel = True
        elif seen_vowel:
            m += 1
            seen_vowel = False
    return m


def _m_gt0(stem: str) -> bool:
    return _measure(stem) > 0


def _m_gt1(stem: str) -> bool:
    return _measure(stem) > 1


def _m_gt1_s_or_t(stem: str) -> bool:
    return stem[-1:] in ("s", "t") and _measure(stem) > 1


def _ends_cvc(stem: str) -> bool:
    """Porter's *o: consonant, vowel, consonant, the last not w, x or y."""
    if len(stem) < 3 or stem[-1] in "wxy":
        return False
    flags = _consonants(stem)
    return flags[-3] and not flags[-2] and flags[-1]


def _has_vowel(stem: str) -> bool:
    """Porter's *v*, as FTS5 tests it: `y` is a vowel anywhere but first."""
    return any(c in _VOWELS or (i > 0 and c == "y") for i, c in enumerate(stem))


_Rule = tuple[str, str, Callable[[str], bool]]

# Each step tries its rules in order; the first suffix that matches (with a non-empty
# stem before it) decides, whether or not its condition holds.
_STEP2: list[_Rule] = [
    (suffix, out, _m_gt0)
    for suffix, out in (
        ("ational", "ate"),
        ("tional", "tion"),
        ("enci", "ence"),
        ("anci", "ance"),
        ("izer", "ize"),
        ("logi", "log"),
        ("bli", "ble"),
        ("alli", "al"),
        ("entli", "ent"),
        ("eli", "e"),
        ("ousli", "ous"),
        ("ization", "ize"),
        ("ation", "ate"),
        ("ator", "ate"),
        ("alism", "al"),
        ("iveness", "ive"),
        ("fulness", "ful"),
        ("ousness", "ous"),
        ("aliti", "al"),
        ("iviti", "ive"),
        ("biliti", "ble"),
    )
]
_STEP3: list[_Rule] = [
    (suffix, out, _m_gt0)
    for suffix, out in (
        ("ical", "ic"),
        ("ness", ""),
        ("icate", "ic"),
        ("iciti", "ic"),
        ("ful", ""),
        ("ative", ""),
        ("alize", "al"),
    )
]
_STEP4: list[_Rule] = [
    (suffix, "", _m_gt1_s_or_t if suffix == "ion" else _m_gt1)
    for suffix in (
        "al",
        "ance",
        "ence",
        "er",
        "ic",
        "able",
        "ible",
        "ant",
        "ement",
        "ment",
        "ent",
        "ion",
        "ou",
        "ism",
        "ate",
        "iti",
        "ous",
        "ive",
        "ize",
    )
]


def _group(rules: list[_Rule]) -> dict[str, list[_Rule]]:
    """Rules by the second-last letter of their suffix, the letter FTS5 switches on:
    only rules of one group can compete, and the first match within it decides."""
    groups: dict[str, list[_Rule]] = {}
    for rule in rules:
        groups.setdefault(rule[0][-2], []).append(rule)
    return groups


_STEPS = [_group(_STEP2), _group(_STEP3), _group(_STEP4)]


def _apply(word: str, groups: dict[str, list[_Rule]]) -> str:
    if len(word) < 2:
        return word
    for suffix, out, condition in groups.get(word[-2], ()):
        if len(word) > len(suffix) and word.endswith(suffix):
            stem = word[: -len(suffix)]
            return stem + out if condition(stem) else word
    return word


def _step1a(w: str) -> str:
    if w.endswith("s"):
        if w[-2:-1] == "e":
            if (len(w) > 4 and w[-4:-2] == "ss") or (len(w) > 3 and w[-3] == "i"):
                return w[:-2]
            return w[:-1]
        if w[-2:-1] != "s":
            return w[:-1]
    return w


def _step1b(w: str) -> str:
    if len(w) > 3 and w.endswith("eed"):
        return w[:-1] if _m_gt0(w[:-3]) else w
    if len(w) > 2 and w.endswith("ed") and _has_vowel(w[:-2]):
        w = w[:-2]
    elif len(w) > 3 and w.endswith("ing") and _has_vowel(w[:-3]):
        w = w[:-3]
    else:
        return w
    for suffix, out in (("at", "ate"), ("bl", "ble"), ("iz", "ize")):
        if len(w) > 2 and w.endswith(suffix):
            return w[:-2] + out
    last = w[-1]
    if len(w) > 1 and last not in _VOWELS and last not in "lsz" and last == w[-2]:
        return w[:-1]
    if _measure(w) == 1 and _ends_cvc(w):
        return w + "e"
    return w


def stem_bytes(w: str) -> str:
    """Stem one folded token given as its UTF-8 bytes, one character per byte."""
    if len(w) < 3 or len(w) > MAX_STEMMED_BYTES:
        return w
    w = _step1b(_step1a(w))
    if w.endswith("y") and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    for groups in _STEPS:
        w = _apply(w, groups)
    if w.endswith("e"):
        m = _measure(w[:-1])
        if m > 1 or (m == 1 and not _ends_cvc(w[:-1])):
            w = w[:-1]
    if len(w) > 1 and w.endswith("ll") and _m_gt1(w[:-1]):
        w = w[:-1]
    return w


def stem(token: str) -> str:
    """The Porter stem of one lower-cased token (any script: see the module docstring)."""
    if token.isascii():
        return stem_bytes(token)
    raw = token.encode("utf-8").decode("latin-1")
    stemmed = stem_bytes(raw)
    return token if stemmed == raw else stemmed.encode("latin-1").decode("utf-8")
