"""What a query says beyond its words: whom it is about, and whether it asks when.

Two cues that lexical and vector similarity both miss in conversational memory:
- A question about a person ("What did Caroline paint?") is best answered by what that
  person said, but a speaker's name is in half of a conversation's lines, so BM25 gives
  it almost no weight and an embedding barely notices it.
- A question asking *when* is answered by a memory that carries time ("last Saturday",
  "in May 2023"), which the question's words rarely match.

Both are read without a model: capitalised words, a small list of temporal words. They
add a bonus to a hit's relevance (FusionWeights.speaker and .time); a memory whose
speaker is unknown, or a query with no cue, is scored as before.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .models import Memory

_CAPITALISED = re.compile(r"\b[A-Z][a-z]+(?:[-'][A-Za-z]+)?\b")
# capitalised function words that start questions and sentences; not names
_NOT_NAME_WORDS = """a an and are as at be but by can could did do does for from had has have he
her his how i if in is it its my no not of on or our she should so that the their then there
these they this to was we were what when where which who whom whose why will with would yes
you your also after before during since until"""
_NOT_NAMES = frozenset(_NOT_NAME_WORDS.split())
# "Caroline:" or "Dr Jane Smith:" at the start of a line: the speaker of a transcript turn
_SPEAKER_PREFIX = re.compile(r"^\s*([A-Z][\w'.-]*(?:\s+[A-Z][\w'.-]*){0,2})\s*:")
_ASKS_WHEN = re.compile(
    r"^\s*when\b|\bwhat (?:date|day|time|year|month)\b|\bwhich (?:date|day|year|month)\b"
    r"|\bhow long ago\b|\bhow many (?:days|weeks|months|years)\b",
    re.IGNORECASE,
)
_MONTHS = "january|february|march|april|may|june|july|august|september|october|november|december"
_MENTIONS_TIME = re.compile(
    r"\b(?:yesterday|today|tonight|tomorrow|ago|last|next|weekend|week|weeks|month|months"
    r"|year|years|monday|tuesday|wednesday|thursday|friday|saturday|sunday|"
    + _MONTHS
    + r"|(?:19|20)\d\d)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class QueryCues:
    names: frozenset[str] = frozenset()  # lower-cased
    asks_when: bool = False

    @property
    def any(self) -> bool:
        return bool(self.names) or self.asks_when


def read_query(text: str) -> QueryCues:
    names = frozenset(
        w.lower().split("'")[0]
        for w in _CAPITALISED.findall(text)
        if w.lower().split("'")[0] not in _NOT_NAMES
    )
    return QueryCues(names=names, asks_when=bool(_ASKS_WHEN.search(text)))


def speaker_of(content: str, metadata: Mapping[str, Any]) -> str | None:
    """Who said it: `metadata["speaker"]` when the app stored one, else a transcript's
    leading "Name:"."""
    given = metadata.get("speaker")
    if isinstance(given, str) and given.strip():
        return given.strip().lower()
    match = _SPEAKER_PREFIX.match(content)
    return match.group(1).lower() if match else None


def is_reply(hit: Memory, neighbour: Memory) -> bool:
    """Whether `neighbour` is another party's turn next to `hit` in a conversation.

    Both speakers must be known and differ: without speakers, memories written one
    after another are not a dialogue, and nothing says the neighbour answers the hit.
    """
    a = speaker_of(hit.content, hit.metadata)
    b = speaker_of(neighbour.content, neighbour.metadata)
    return a is not None and b is not None and a != b


def mentions_time(content: str) -> bool:
    return bool(_MENTIONS_TIME.search(content))


def cue_bonus(
    cues: QueryCues,
    content: str,
    metadata: Mapping[str, Any],
    *,
    speaker_weight: float,
    time_weight: float,
) -> float:
    """The relevance a memory gains from the query's cues."""
    if not cues.any:
        return 0.0
    bonus = 0.0
    if cues.names and speaker_weight > 0:
        speaker = speaker_of(content, metadata)
        if speaker is not None and cues.names.intersection(speaker.split()):
            bonus += speaker_weight
    if cues.asks_when and time_weight > 0 and mentions_time(content):
        bonus += time_weight
    return bonus
