"""Query cues: the speaker a question names, and whether it asks when."""

from __future__ import annotations

import pytest

from tiered_memory.cues import QueryCues, cue_bonus, mentions_time, read_query, speaker_of


def test_names_are_capitalised_words_that_are_not_function_words() -> None:
    cues = read_query("What did Caroline and Dr Smith's team paint in Paris?")
    assert cues.names == {"caroline", "dr", "smith", "paris"}
    assert not read_query("What should I do?").names


@pytest.mark.parametrize(
    ("query", "asks"),
    [
        ("When did Melanie go camping?", True),
        ("what year did they move", True),
        ("How many days ago did I buy the bike?", True),
        ("Which month was the concert?", True),
        ("What did Melanie paint?", False),
        ("Where is the whenua?", False),
    ],
)
def test_asks_when(query: str, asks: bool) -> None:
    assert read_query(query).asks_when is asks


def test_the_speaker_comes_from_metadata_or_a_transcript_prefix() -> None:
    assert speaker_of("Caroline: I went to the group", {}) == "caroline"
    assert speaker_of("Dr Jane Smith: take two", {}) == "dr jane smith"
    assert speaker_of("anything at all", {"speaker": "Mel"}) == "mel"
    assert speaker_of("note: buy milk", {}) is None  # lower-case: not a name
    assert speaker_of("The plan for Q3 is: ship it", {}) is None  # more than a name


def test_time_mentions() -> None:
    assert mentions_time("we went last Saturday")
    assert mentions_time("back in May 2023")
    assert not mentions_time("I love painting sunsets")


def test_bonus_adds_the_weights_of_the_cues_that_hold() -> None:
    cues = read_query("When did Caroline go to the support group?")
    kwargs = {"speaker_weight": 0.1, "time_weight": 0.15}
    assert cue_bonus(cues, "Caroline: I went yesterday", {}, **kwargs) == pytest.approx(0.25)
    assert cue_bonus(cues, "Caroline: it was lovely", {}, **kwargs) == pytest.approx(0.1)
    assert cue_bonus(cues, "Melanie: I went yesterday", {}, **kwargs) == pytest.approx(0.15)
    assert cue_bonus(QueryCues(), "Caroline: yesterday", {}, **kwargs) == 0.0
    off = {"speaker_weight": 0.0, "time_weight": 0.0}
    assert cue_bonus(cues, "Caroline: I went yesterday", {}, **off) == 0.0
