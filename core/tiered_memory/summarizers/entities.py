"""The entities of a memory, found without a model: seed 001's summary prompt gives the
summariser "linked entities as context" (`Entities: {entity_names}`), the names,
places, dates and numbers a summary should keep. Here they are read off the text of
the memory and of the memories linked to it:

- dates and times ("2026-01-15", "March 14th", "3pm");
- numbers, amounts and percentages ("$4,200", "15%");
- capitalised phrases ("Ava Chen", "Lisbon", "PriceSpider"), without the common
  words that are capitalised by grammar ("The", "We", "Then", ...).

Bounded: at most `MAX_ENTITIES` entries and `MAX_CHARS` characters joined, so the
prompt stays near seed 001's ~50 tokens of context however linked a memory is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MAX_ENTITIES = 12
MAX_CHARS = 200

MONTHS = (
    "january|february|march|april|may|june|july|august|september|october|november|december"
    "|jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
)
WEEKDAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
DATE = re.compile(
    r"\b\d{4}-\d{2}-\d{2}\b"  # 2026-01-15
    r"|\b\d{1,2}[/.]\d{1,2}[/.]\d{2,4}\b"  # 15/01/2026
    rf"|\b(?:{MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b"  # Jan 15th
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{MONTHS})\b"  # 15th of January
    rf"|\b(?:{WEEKDAYS}|today|tomorrow|yesterday|tonight)\b"
    r"|\b\d{1,2}(?::\d{2})?\s*(?:am|pm)\b|\b\d{1,2}:\d{2}\b",  # 3pm, 14:30
    re.IGNORECASE,
)
NUMBER = re.compile(r"(?<![\w])[$€£]?\d[\d,.]*%?")
# A whole number token (not the digits opening a hex id such as 81592b8b).
_NUMBER_TOKEN = re.compile(r"(?<![\w.-])[$€£]?\d[\d,.]*%?(?![\w-])")
_NAME = re.compile(r"\b[A-Z][\w'’&-]*(?:\s+(?:of\s+|de\s+|van\s+)?[A-Z][\w'’&-]*)*")
_OPENERS = frozenset(
    (  # noqa: SIM905 (a word list reads better than 60 quoted strings)
        "a an the i we you he she it they my our your his her its their this that these "
        "those there here then when what who why how where which if and but or so yes no "
        "ok okay also just please thanks thank hi hello dear user assistant note todo "
        "today tomorrow yesterday tonight"
    ).split()
)


def entity_names(
    texts: Iterable[str], *, max_entities: int = MAX_ENTITIES, max_chars: int = MAX_CHARS
) -> tuple[str, ...]:
    """The entities of `texts`, first seen first, each once (case aside), within
    `max_entities` entries and `max_chars` characters joined by ", "."""
    out: list[str] = []
    seen: set[str] = set()
    used = 0
    for text in texts:
        for entity in _entities_of(text):
            key = entity.casefold()
            if key in seen:
                continue
            cost = len(entity) + (2 if out else 0)
            if used + cost > max_chars:
                continue
            seen.add(key)
            out.append(entity)
            used += cost
            if len(out) >= max_entities:
                return tuple(out)
    return tuple(out)


def _entities_of(text: str) -> list[str]:
    """Dates, names and numbers of one text, in order of appearance."""
    found: list[tuple[int, str]] = []
    taken: list[tuple[int, int]] = []
    for match in DATE.finditer(text):
        found.append((match.start(), match.group().strip()))
        taken.append(match.span())
    for match in _NAME.finditer(text):
        if any(a <= match.start() < b for a, b in taken):
            continue
        words = match.group().split()
        # "The" of "The Lisbon office" is grammar, not a name; so is "Then" anywhere
        while words and words[0].lower() in _OPENERS:
            words = words[1:]
        if words:
            found.append((match.start(), " ".join(words)))
    for match in _NUMBER_TOKEN.finditer(text):
        if any(a <= match.start() < b for a, b in taken):
            continue
        number = match.group().rstrip(".,")
        if number:
            found.append((match.start(), number))
    return [entity for _, entity in sorted(found, key=lambda t: t[0])]


__all__ = ["DATE", "MAX_CHARS", "MAX_ENTITIES", "NUMBER", "entity_names"]
