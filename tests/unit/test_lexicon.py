"""The Python tokenizer and BM25 give what FTS5 itself gives, on one namespace's texts.

The store keeps lexical statistics per namespace in its own tables (issue 16), so the
words and the formula are computed in Python: words by FTS5's unicode61 rules, each
stemmed by Snowball's English stemmer (PyStemmer's C build). FTS5, in the sqlite3 module,
is the reference for the words and the formula; `snowballstemmer` itself for the stems.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from collections.abc import Iterator

import numpy as np
import pytest
import snowballstemmer
from hypothesis import given, settings
from hypothesis import strategies as st

from tiered_memory import lexicon
from tiered_memory.lexicon import (
    LexicalStatistics,
    bm25,
    query_terms,
    stem,
    term_counts,
    tokenizer_version,
    tokens,
)

TOKENIZER = "unicode61 remove_diacritics 2"


@pytest.fixture(scope="module")
def fts() -> Iterator[sqlite3.Connection]:
    conn = sqlite3.connect(":memory:")
    conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(content, tokenize='{TOKENIZER}')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    yield conn
    conn.close()


_SNOWBALL = snowballstemmer.stemmer("english")


def fts_tokens(conn: sqlite3.Connection, text: str) -> list[str]:
    """FTS5's words of `text`, in order, each with its Snowball English stem."""
    conn.execute("DELETE FROM t")
    conn.execute("INSERT INTO t (rowid, content) VALUES (1, ?)", (text,))
    rows = conn.execute('SELECT term, "offset" FROM v').fetchall()
    return [_SNOWBALL.stemWord(term) for term, _ in sorted(rows, key=lambda row: row[1])]


SAMPLES = [
    "The running runners ran; they are generalizations of relational hopefulness",
    "Caf\u00e9 na\u00efve CR\u00c8ME br\u00fbl\u00e9e "
    "\u00c6r\u00f8 \u0141\u00f3d\u017a stra\u00dfe",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \ud55c\uad6d\uc5b4 "
    "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac",
    "e\u0301cole x\u0301y snake_case don't 3.14 \u00bd \u00b2 \ue000abc",
    "agreed feed bled hoping hopping sky happy conditional rational digitizer",
    "\x1b]0;pwned\x07\x1b[2J tab\there NUL-free \u200b zero width",
]


@pytest.mark.parametrize("text", SAMPLES)
def test_tokens_are_fts5s(fts: sqlite3.Connection, text: str) -> None:
    assert tokens(text) == fts_tokens(fts, text)


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1, max_size=40))
def test_any_text_tokenizes_like_fts5(text: str) -> None:
    """Beyond Latin text FTS5's Unicode 6.1 tables and Python's may disagree on a
    character's class; the store only needs its own words to be consistent, so this
    compares the texts whose characters both agree on (most of them)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute(f"CREATE VIRTUAL TABLE t USING fts5(content, tokenize='{TOKENIZER}')")
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        text = "".join(c for c in text if ord(c) < 0x0500 and not 0xD800 <= ord(c) < 0xE000)
        assert tokens(text) == fts_tokens(conn, text)
    finally:
        conn.close()


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("caresses", "caress"),
        ("ponies", "poni"),
        ("agreed", "agre"),
        ("hopping", "hop"),
        ("happy", "happi"),
        ("generalization", "general"),
        ("hopefulness", "hope"),
        ("codes", "code"),
        ("coding", "code"),
        ("say", "say"),
        ("ab", "ab"),
    ],
)
def test_snowball_english_stems(word: str, expected: str) -> None:
    assert stem(word) == expected


def test_query_terms_and_counts() -> None:
    assert query_terms("Runs, running; RAN and runs") == ["run", "ran", "and"]
    assert query_terms("The vault CODES, coding na\u00efvely") == ["the", "vault", "code", "naiv"]
    assert term_counts("the cat and the hat") == {"the": 2, "cat": 1, "and": 1, "hat": 1}


def test_the_tokenizer_version_names_what_the_terms_depend_on() -> None:
    """A store indexed under another version is re-indexed at open (backends.sqlite.lexicon)."""
    version = tokenizer_version()
    assert "/pystemmer-english-" in version  # PyStemmer is a dependency of the core
    assert "unicode-" in version


def test_words_are_stemmed_by_pystemmer() -> None:
    """snowballstemmer hands its work to PyStemmer, the C build, when it is installed:
    ~1.6 us a word not stemmed before, against ~37 in Python (the lexicon docstring)."""
    assert type(snowballstemmer.stemmer("english")).__module__.split(".")[0] == "Stemmer"
    assert stem("codes") == stem("coding") == "code"


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(categories=["Ll", "Nd"]), min_size=1, max_size=20))
def test_pystemmer_stems_as_the_python_snowball_stemmer(word: str) -> None:
    """The same algorithm in C and in Python: the same stems (also for each of the 64,888
    distinct words of the LoCoMo and LongMemEval dev sets, and 200,000 random strings,
    checked when PyStemmer became a dependency). The tokenizer version still names which
    one stems, as a new release of either may stem differently."""
    from snowballstemmer.english_stemmer import EnglishStemmer

    assert stem(word) == EnglishStemmer().stemWord(word)


def test_the_tokenizer_version_tells_pystemmer_from_snowballstemmer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without PyStemmer, snowballstemmer stems in Python (another release of the
    algorithm's code): a store indexed by one is re-indexed when opened with the other."""

    class PythonStemmer:  # what `snowballstemmer.stemmer` is without PyStemmer
        pass

    PythonStemmer.__module__ = "snowballstemmer.english_stemmer"
    with_c = tokenizer_version()
    tokenizer_version.cache_clear()
    try:
        with monkeypatch.context() as patch:
            patch.setattr(lexicon.snowballstemmer, "stemmer", PythonStemmer)
            patch.setattr(lexicon.importlib.metadata, "version", lambda name: f"{name}-9.9")
            pure = tokenizer_version()
    finally:
        tokenizer_version.cache_clear()
    assert pure != with_c
    assert pure.endswith("/snowball-english-snowballstemmer-9.9")
    assert tokenizer_version() == with_c  # unchanged for a store indexed before


def test_bm25_equals_fts5(fts: sqlite3.Connection) -> None:
    """On one table, the Python BM25 equals FTS5's bm25() bit for bit. FTS5 is given
    the stemmed words, so both score the same terms."""
    docs = {
        1: "apple apple banana",
        2: "apple cherry grape and a much longer tail of words about fruit",
        3: "cherry grape melon",
        4: "bananas and apples",
        5: "nothing here",
    }
    fts.execute("DELETE FROM t")
    fts.executemany(
        "INSERT INTO t (rowid, content) VALUES (?, ?)",
        [(pk, " ".join(tokens(text))) for pk, text in docs.items()],
    )
    terms = query_terms("apple banana grapes")
    match = " OR ".join(f'"{term}"' for term in terms)
    expected = dict(
        fts.execute("SELECT rowid, -bm25(t) FROM t WHERE t MATCH ?", (match,)).fetchall()
    )
    counts = {pk: term_counts(text) for pk, text in docs.items()}
    lengths = {pk: sum(c.values()) for pk, c in counts.items()}
    stats = LexicalStatistics(
        documents=len(docs),
        tokens=sum(lengths.values()),
        frequencies={t: sum(1 for c in counts.values() if t in c) for t in terms},
    )
    postings = np.array(
        [
            (i, pk, counts[pk][term], lengths[pk])
            for i, term in enumerate(terms)
            for pk in docs
            if term in counts[pk]
        ],
        dtype=np.int64,
    )
    documents, scores = bm25(stats, terms, *postings.T)
    assert dict(zip(documents.tolist(), scores.tolist(), strict=True)) == expected


# Texts as the index's write path meets them: mostly ASCII words, some of them in
# other scripts (accents, CJK, emoji, combining marks, private use), and empty ones.
_PIECES = st.sampled_from(
    [
        "code",
        "Codes",
        "CODING",
        "the",
        "4711",
        "snake_case",
        "don't",
        "Caf\u00e9",
        "cafe\u0301",
        "\u65e5\u672c\u8a9e",
        "\U0001f600",
        "\U0001f468\u200d\U0001f469\u200d\U0001f467",
        "\ue000abc",
        "\u00c6r\u00f8",
        "...",
        "",
    ]
)
_TEXTS = st.one_of(
    st.lists(_PIECES, max_size=12).map(" ".join),
    st.text(max_size=30),
    st.text(alphabet=st.characters(max_codepoint=127), max_size=30),
)


def _reference_terms(text: str) -> list[str]:
    """The terms by the full unicode61 scan, word by word (no ASCII shortcut)."""
    from tiered_memory import lexicon

    return [lexicon._term(word) for word in lexicon._WORD.findall(text)]


@settings(max_examples=300, deadline=None)
@given(_TEXTS)
def test_the_ascii_scan_and_the_counts_equal_the_word_by_word_terms(text: str) -> None:
    """The write path's shortcuts (ASCII scan, counting words before stemming them)
    give the terms and counts of the word-by-word path."""
    expected = _reference_terms(text)
    assert tokens(text) == expected
    counts = term_counts(text)
    assert counts == dict(Counter(expected))
    assert list(counts) == list(dict.fromkeys(expected))  # first-occurrence order
