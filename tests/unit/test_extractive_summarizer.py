"""The extractive summariser keeps the retrievable detail, verbatim, and nothing else."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiered_memory.errors import ConfigurationError
from tiered_memory.ports import Summarizer, SummaryRequest
from tiered_memory.summarizers import ExtractiveSummarizer
from tiered_memory.summarizers.extractive import split_sentences

MEETING = (
    "We talked for a while about the weather and how the garden is doing. "
    "It was a pleasant chat overall. "
    "Dr. Ava Chen will present the Q3 budget of $45,000 on March 14th at 3pm. "
    "Honestly the coffee was not great. "
    'She said "the Berlin office opens in 2027." '
    "The team seemed happy with that plan. "
    "Remember to send the slides to Marco before Friday."
)


def summarize(text: str, **kwargs: int) -> str:
    return ExtractiveSummarizer(**kwargs).summarize_text(text)


def test_keeps_names_numbers_and_dates() -> None:
    summary = summarize(MEETING)
    for detail in ("Ava Chen", "$45,000", "March 14th", "3pm", "Berlin", "2027", "Marco", "Friday"):
        assert detail in summary
    for filler in ("coffee", "pleasant chat", "weather"):
        assert filler not in summary


def test_returns_two_or_three_sentences_of_a_long_memory() -> None:
    long_memories = [
        MEETING,
        " ".join(f"Sentence number {i} mentions Project Orion milestone {i}." for i in range(12)),
        "I went out. It rained a lot. We met Sam at 9:30. Lunch was fine. "
        "Sam's flight AF1234 leaves on 2026-05-02. Then we went home. It was late.",
    ]
    for text in long_memories:
        count = len(split_sentences(summarize(text)))
        assert 2 <= count <= 3, text


def test_sentences_are_verbatim_and_in_original_order() -> None:
    summary = summarize(MEETING)
    positions = [MEETING.index(sentence) for sentence in split_sentences(summary)]
    assert positions == sorted(positions)
    assert len(positions) == 3


def test_is_deterministic_across_calls_and_instances() -> None:
    results = {summarize(MEETING) for _ in range(5)}
    results.add(ExtractiveSummarizer().summarize_text(MEETING))
    assert len(results) == 1


def test_short_memory_is_returned_whole() -> None:
    assert summarize("  User's daughter is called Ava.  ") == "User's daughter is called Ava."
    two = "Ava starts school on 2026-09-01. She is excited."
    assert summarize(two) == two


def test_multi_line_short_memory_is_returned_whole_with_its_lines() -> None:
    note = "Shopping:\n- eggs\n- milk"
    assert summarize(note) == note


def test_length_is_capped() -> None:
    text = " ".join(
        f"On 2026-01-{day:02d} Kim Lee logged {day * 7} units at the Oslo plant."
        for day in range(1, 29)
    )
    summary = summarize(text, max_chars=200)
    assert len(summary) <= 200
    assert summary
    assert all(sentence in text for sentence in split_sentences(summary))


def test_one_oversized_sentence_is_cut_at_a_word_boundary() -> None:
    text = "Alice " + "wrote a very long note about Paris " * 40 + "and stopped."
    text = text + " " + text  # two sentences, both too long
    summary = summarize(text, max_chars=100)
    assert 50 < len(summary) <= 100
    assert text.startswith(summary)
    assert text[len(summary)] == " "


def test_abbreviations_and_initials_do_not_split_sentences() -> None:
    text = "Dr. J. Smith met Mrs. Brown at 10 a.m. on Jan. 5 at the U.S. embassy. Then they left."
    assert split_sentences(text) == [
        "Dr. J. Smith met Mrs. Brown at 10 a.m. on Jan. 5 at the U.S. embassy.",
        "Then they left.",
    ]


def test_closing_quotes_stay_with_their_sentence() -> None:
    assert split_sentences('He said "go." She went.') == ['He said "go."', "She went."]


def test_entities_of_the_request_are_preferred() -> None:
    text = (
        "The meeting ran long. Paula Ng raised the budget issue with Finance. "
        "The office plants need water. Someone mentioned the kraken again. "
        "Nobody agreed on lunch. We left at the end."
    )
    plain = ExtractiveSummarizer().summarize_text(text)
    boosted = ExtractiveSummarizer().summarize_text(text, entities=("kraken",))
    assert "kraken" not in plain
    assert "Someone mentioned the kraken again." in boosted


async def test_implements_the_summarizer_port() -> None:
    summarizer = ExtractiveSummarizer()
    assert isinstance(summarizer, Summarizer)
    summary = await summarizer.summarize(SummaryRequest(content=MEETING, entities=("Marco",)))
    assert summary.model == "extractive"
    assert (summary.input_tokens, summary.output_tokens) == (0, 0)
    assert summary.text == summarize(MEETING)


def test_rejects_nonsense_limits() -> None:
    with pytest.raises(ConfigurationError):
        ExtractiveSummarizer(max_sentences=0)
    with pytest.raises(ConfigurationError):
        ExtractiveSummarizer(max_chars=10)


def _is_ordered_selection(summary: str, sentences: list[str], start: int = 0) -> bool:
    """`summary` is some of `sentences`, in their order, joined by a space or newline."""
    if not summary:
        return True
    for i in range(start, len(sentences)):
        if summary.startswith(sentences[i]):
            rest = summary[len(sentences[i]) :]
            if rest and rest[0] not in " \n":
                continue
            if _is_ordered_selection(rest[1:], sentences, i + 1):
                return True
    return False


_words = st.sampled_from(
    ["Ava", "met", "Bob", "on", "2026-03-04", "at", "5pm", "the", "cost", "was", "$12", "ok", "Dr."]
)
_sentences = st.lists(_words, min_size=1, max_size=12).map(lambda ws: " ".join(ws))
_enders = st.sampled_from([". ", "! ", "? ", ".\n", "\n", " "])


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(_sentences, _enders), min_size=1, max_size=15))
def test_property_summary_is_made_of_the_original_and_bounded(
    parts: list[tuple[str, str]],
) -> None:
    text = "".join(s + end for s, end in parts)
    summary = summarize(text, max_chars=160)
    assert len(summary) <= 160
    sentences = split_sentences(text)
    assert (
        summary == text.strip()
        or _is_ordered_selection(summary, sentences)
        or any(s.startswith(summary) for s in sentences)  # one oversized sentence, cut
    )
    assert summarize(text, max_chars=160) == summary


def test_a_summary_is_shorter_than_its_memory() -> None:
    """Over `keep_chars`, a summary takes at most `ratio` of the memory: it is what
    stays in the database once the memory is archived, the original is kept whole."""
    one_sentence = "Ava " + "and Marco planned the Oslo launch for the spring " * 4 + "today."
    summary = summarize(one_sentence)
    assert len(summary) <= max(120, int(0.6 * len(one_sentence)))
    assert one_sentence.startswith(summary)
    short = "Ava's school play is on the 12th of June, and she will be a tree in it."
    assert summarize(short) == short  # up to keep_chars: its own summary
    assert summarize(one_sentence, keep_chars=1000, ratio=1.0) == one_sentence
    assert len(ExtractiveSummarizer(keep_chars=60, ratio=0.3).summarize_text(MEETING)) <= 111
    with pytest.raises(ConfigurationError):
        ExtractiveSummarizer(ratio=0.0)
