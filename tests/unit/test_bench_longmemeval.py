"""The LongMemEval_S harness: what becomes a memory, what counts as found, and the
embedding cache both quality benchmarks share. No model and no data set needed."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from benchmarks.flat import pack_ranked, rank_flat
from benchmarks.longmemeval import Item, load, load_item, parse_date, replay, score
from benchmarks.quality import VARIANTS, CachedEmbedder
from tiered_memory.embeddings import HashingEmbedder


def raw_item(qid: str = "q1", qtype: str = "knowledge-update") -> dict[str, Any]:
    # haystack not in date order, as a few LongMemEval_S haystacks are
    return {
        "question_id": qid,
        "question_type": qtype,
        "question": "Where do I keep my bike now?",
        "question_date": "2023/06/10 (Sat) 09:00",
        "answer": "in the garage",
        "answer_session_ids": ["late", "early"],
        "haystack_session_ids": ["late", "early", "noise"],
        "haystack_dates": [
            "2023/06/01 (Thu) 10:00",
            "2023/05/01 (Mon) 08:30",
            "2023/05/15 (Mon) 12:00",
        ],
        "haystack_sessions": [
            [
                {"role": "user", "content": "I moved my bike to the garage.", "has_answer": True},
                {"role": "assistant", "content": "Good idea, it stays dry there."},
            ],
            [
                {"role": "user", "content": "My bike lives in the hallway."},
                {"role": "assistant", "content": "The hallway, noted.", "has_answer": True},
                {"role": "user", "content": "It blocks the door.", "has_answer": True},
            ],
            [{"role": "user", "content": "Recommend a pasta recipe with tomatoes."}],
        ],
    }


def test_parse_date_is_aware_utc() -> None:
    assert parse_date("2023/05/30 (Tue) 22:10") == datetime(
        2023, 5, 30, 22, 10, tzinfo=timezone.utc
    )


def test_sessions_replay_in_date_order_and_only_user_turns_become_memories() -> None:
    item = load_item(raw_item())
    assert [s.id for s in item.sessions] == ["early", "noise", "late"]
    # ids keep the haystack position of the session and the turn's index in it
    assert [t.id for t in item.turns] == [
        "qq1-s001-t000",
        "qq1-s001-t002",
        "qq1-s002-t000",
        "qq1-s000-t000",
    ]
    # an assistant evidence turn is not a memory, so not evidence either
    assert item.evidence == {"qq1-s001-t002", "qq1-s000-t000"}


def test_score_sessions_all_any_and_turns() -> None:
    item = load_item(raw_item())
    assert score(item, {"qq1-s000-t000"}) == {
        "recall_all": 0.0,
        "recall_any": 1.0,
        "turn_recall": 0.5,
    }
    # a non-evidence turn of an answer session still finds that session
    assert score(item, {"qq1-s000-t000", "qq1-s001-t000"}) == {
        "recall_all": 1.0,
        "recall_any": 1.0,
        "turn_recall": 0.5,
    }
    no_user_evidence = raw_item()
    for session in no_user_evidence["haystack_sessions"]:
        for turn in session:
            turn.pop("has_answer", None)
    assert score(load_item(no_user_evidence), set())["turn_recall"] is None


def test_subset_interleaves_types_and_drops_abstention(tmp_path: Path) -> None:
    import json

    rows = [raw_item(f"a{i}", "multi-session") for i in range(3)]
    rows += [raw_item(f"b{i}", "temporal-reasoning") for i in range(3)]
    rows.append(raw_item("b9_abs", "temporal-reasoning"))
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(rows), encoding="utf-8")
    assert [i.id for i in load(path)] == ["a0", "a1", "a2", "b0", "b1", "b2"]
    assert [i.id for i in load(path, limit=3)] == ["a0", "b0", "a1"]
    assert [i.id for i in load(path, ids=["b1", "a0"])] == ["b1", "a0"]


def test_flat_packing_has_no_item_cap_unless_asked() -> None:
    texts = [f"w{i}" for i in range(300)]
    words = lambda s: len(s.split())  # noqa: E731 - "- wN" costs 2 tokens
    assert len(pack_ranked(texts, range(300), 1000, words)) == 300
    assert len(pack_ranked(texts, range(300), 1000, words, max_items=20)) == 20


def test_flat_hybrid_ranks_every_text_even_beyond_its_pool() -> None:
    embedder = HashingEmbedder(32)
    texts = [f"note {i} about topic {i % 7}" for i in range(40)]
    vectors = list(embedder.embed_sync(texts))
    query = ("topic 3", embedder.embed_sync(["topic 3"])[0])
    ranks = rank_flat(texts, vectors, [query], candidates=5)
    assert sorted(ranks["flat hybrid"][0]) == list(range(40))
    assert sorted(ranks["flat vector"][0]) == list(range(40))


def test_flat_hybrid_keeps_the_lexical_term_when_a_pooled_text_has_no_match() -> None:
    # equal cosines: only BM25 can order them, although "cherry" matches no query word
    texts = ["apple pie", "banana bread", "cherry"]
    vector = np.ones(4, dtype=np.float32)
    ranks = rank_flat(texts, [vector, vector, vector], [("banana", vector)], candidates=10)
    assert ranks["flat hybrid"][0][0] == 1


class CountingEncoder:
    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return HashingEmbedder(16).embed_sync(texts)


def test_embedding_cache_survives_a_rerun(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    first = CachedEmbedder()
    encode = CountingEncoder()
    monkeypatch.setattr(first.inner, "_encode", encode)
    assert first.load(tmp_path) == 0
    first.warm(["alpha", "beta", "alpha"])
    first.save()
    assert encode.calls == [["alpha", "beta"]]

    second = CachedEmbedder()
    again = CountingEncoder()
    monkeypatch.setattr(second.inner, "_encode", again)
    assert second.load(tmp_path) == 2
    second.warm(["beta", "gamma"])
    assert again.calls == [["gamma"]]
    np.testing.assert_array_equal(second.get("beta"), first.get("beta"))
    second.save()
    assert CachedEmbedder().load(tmp_path) == 3


class HashingCache(CachedEmbedder):
    """The harness's embedder over HashingEmbedder, so the replay runs without a model."""

    def __init__(self) -> None:
        super().__init__()
        self.inner._encode = HashingEmbedder(64).embed_sync  # type: ignore[method-assign]


@pytest.mark.parametrize("variant", [v for v in VARIANTS if v.protocol == "replay"][:1])
def test_replay_stores_each_user_turn_and_scores_every_budget(tmp_path: Path, variant: Any) -> None:
    item: Item = load_item(raw_item())
    scores, stats = asyncio.run(replay(item, HashingCache(), variant, [250, 2000], tmp_path))
    assert set(scores) == {250, 2000}
    # the turn that shares the question's words is found
    assert scores[2000]["recall_any"] == 1.0
    assert stats["final_hot"] + stats["final_warm"] + stats["final_cold"] == 4
    assert stats["deduplicated"] == 0
