"""The no-network summariser: two or three sentences of the memory itself.

An archive summary is searched by similarity and read by a person deciding whether
to expand it, so the sentences that carry names, numbers and dates are the ones to
keep (seed 001). Nothing is paraphrased: every sentence returned is a verbatim
slice of the original, so an extractive summary can never invent a fact.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from tiered_memory.errors import ConfigurationError
from tiered_memory.ports import Summary, SummaryRequest

from .entities import DATE, NUMBER

# A sentence ends at . ! or ? (optionally followed by closing quotes/brackets) and the
# next one starts after whitespace. Newlines always end a sentence: notes and lists
# rarely punctuate their lines.
_SENTENCE_END = re.compile(r"""(?<=[.!?])(["'”’)\]]*)\s+""")
_LINE_BREAK = re.compile(r"\s*\n\s*")
_WORD = re.compile(r"[\w'’-]+", re.UNICODE)

# Abbreviations whose full stop does not end a sentence ("Dr. Ava Chen", "Jan. 5").
_ABBREVIATIONS = frozenset(
    (  # noqa: SIM905 (a word list reads better than 50 quoted strings)
        "mr mrs ms dr prof sr jr st mt vs etc e.g i.e eg ie inc ltd co corp no nos fig approx "
        "dept est jan feb mar apr jun jul aug sep sept oct nov dec mon tue tues wed thu thur "
        "thurs fri sat sun a.m p.m u.s u.k"
    ).split()
)

_DATE, _NUMBER = DATE, NUMBER


@dataclass(frozen=True)
class _Sentence:
    position: int
    text: str
    score: float


class ExtractiveSummarizer:
    """Keeps the 2-3 most informative sentences of a memory, verbatim and in order.

    Deterministic and free, so it is the embedded default and the fallback when the
    LLM summariser is unavailable.

    A summary is at most `ratio` of its memory's length (and at most `max_chars`):
    it is what stays in the database once the memory is archived, and a "summary" as
    long as the memory would save nothing (the original is kept whole in object
    storage). Memories up to `keep_chars` are short enough to be their own summary
    and are returned whole; a single sentence over the budget keeps its opening words.
    """

    def __init__(
        self,
        *,
        max_sentences: int = 3,
        max_chars: int = 480,
        keep_chars: int = 120,
        ratio: float = 0.6,
    ) -> None:
        if max_sentences < 1:
            raise ConfigurationError("max_sentences must be at least 1")
        if max_chars < 40:
            raise ConfigurationError("max_chars must be at least 40 (a summary needs a sentence)")
        if keep_chars < 0:
            raise ConfigurationError("keep_chars must be >= 0")
        if not 0.0 < ratio <= 1.0:
            raise ConfigurationError("ratio must be in (0, 1]: a summary is not longer")
        self.max_sentences = max_sentences
        self.max_chars = max_chars
        self.keep_chars = min(keep_chars, max_chars)  # max_chars caps every summary
        self.ratio = ratio

    def budget(self, length: int) -> int:
        """The characters a summary of a `length`-character memory may take."""
        return min(self.max_chars, max(self.keep_chars, int(length * self.ratio)))

    async def summarize(self, request: SummaryRequest) -> Summary:
        return Summary(
            text=self.summarize_text(request.content, request.entities), model="extractive"
        )

    def summarize_text(self, content: str, entities: tuple[str, ...] = ()) -> str:
        """The summary as plain text; the async port method only wraps this."""
        text = content.strip()
        sentences = split_sentences(text)
        budget = self.budget(len(text))
        if len(text) <= budget and len(sentences) <= self.max_sentences:
            return text
        if not sentences:
            return ""
        scored = [_Sentence(i, s, _score(s, i, entities)) for i, s in enumerate(sentences)]
        # Best first; ties go to the earlier sentence, which keeps the result stable.
        ranked = sorted(scored, key=lambda s: (-s.score, s.position))
        chosen: list[_Sentence] = []
        used = 0
        for sentence in ranked:
            if len(chosen) == self.max_sentences:
                break
            cost = len(sentence.text) + (1 if chosen else 0)
            if used + cost <= budget:
                chosen.append(sentence)
                used += cost
        if not chosen:
            # Even the best sentence is longer than the cap: keep its opening words.
            return _cut_at_word(ranked[0].text, budget)
        return _join(s.text for s in sorted(chosen, key=lambda s: s.position))


def split_sentences(text: str) -> list[str]:
    """Sentences of `text`, each a verbatim slice; abbreviations do not split."""
    sentences: list[str] = []
    for line in _LINE_BREAK.split(text):
        if not line:
            continue
        start = 0
        for match in _SENTENCE_END.finditer(line):
            candidate = line[start : match.end(1)]
            if _ends_with_abbreviation(candidate):
                continue
            if candidate.strip():
                sentences.append(candidate.strip())
            start = match.end()
        tail = line[start:].strip()
        if tail:
            sentences.append(tail)
    return sentences


def _ends_with_abbreviation(candidate: str) -> bool:
    """True when the full stop ending `candidate` belongs to an abbreviation or initial."""
    if not candidate.endswith("."):
        return False
    last = candidate.rsplit(None, 1)[-1].rstrip(".").lower()
    return last in _ABBREVIATIONS or (len(last) == 1 and last.isalpha())


def _score(sentence: str, position: int, entities: tuple[str, ...]) -> float:
    """How much retrievable detail a sentence carries: dates, numbers and names."""
    words = _WORD.findall(sentence)
    if not words:
        return 0.0
    dates = len(_DATE.findall(sentence))
    numbers = len(_NUMBER.findall(_DATE.sub(" ", sentence)))
    # Capitalised words after the first are names, places and products (the first
    # word is capitalised by grammar, not meaning); acronyms count too.
    names = sum(1 for w in words[1:] if w[0].isupper())
    lowered = sentence.lower()
    entity_hits = sum(1 for e in entities if e.strip() and e.strip().lower() in lowered)
    score = 2.0 * dates + 1.5 * numbers + 1.0 * names + 2.0 * entity_hits
    if position == 0:
        score += 1.0  # the opening sentence usually states the topic
    if len(words) < 4:
        score -= 1.0  # fragments ("Thanks!") carry little even when capitalised
    return score


def _join(sentences: Iterable[str]) -> str:
    """Sentences side by side; an unpunctuated line keeps its line break, so the
    summary still reads (and splits) as the separate lines it came from."""
    out = ""
    for sentence in sentences:
        if out:
            out += " " if out.endswith((".", "!", "?", '"', "'", "”", "’", ")", "]")) else "\n"
        out += sentence
    return out


def _cut_at_word(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    return cut[:space].rstrip() if space > limit // 2 else cut


__all__ = ["ExtractiveSummarizer", "split_sentences"]
