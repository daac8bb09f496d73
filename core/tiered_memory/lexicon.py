"""Words as the lexical index sees them, and BM25 over one namespace's statistics.

Words are those of FTS5's `unicode61 remove_diacritics 2` tokenizer: letters, digits
and private-use characters make words, and case and the diacritics of Latin letters
are folded away. Each word is then reduced to its stem by the Snowball English stemmer
(`snowballstemmer`, the maintained successor of Porter's), so "codes", "coding" and
"code" meet. PyStemmer, a dependency, is the C build of the same stemmer, and
snowballstemmer hands it the work when it is installed: a word not stemmed before costs
~1.6 us instead of ~37 (each word's stem is then cached), which on real conversation
text in a new process was a tenth to a fifth of `add_many`'s time. The two gave the
same stem for every one of the 64,888 distinct words of the LoCoMo and LongMemEval dev
sets; the tokenizer version names which one stems all the same (`tokenizer_version`),
so a store indexed by the other is indexed again once when opened.

The SQLite store runs this inside its own write transactions (`backends/sqlite/lexicon`),
so the statistics BM25 needs (documents, tokens, document frequencies) are counted per
namespace: a namespace's lexical scores are the same whatever other namespaces hold.

`bm25` is FTS5's formula (k1 1.2, b 0.75, idf floored at 1e-6), evaluated in the
same order, so on the same terms the scores are those FTS5 would give.
"""

from __future__ import annotations

import functools
import importlib.metadata
import math
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import snowballstemmer

MAX_QUERY_TERMS = 64
K1 = 1.2
B = 0.75
MIN_IDF = 1e-6

# A word starts with a letter, digit or private-use character (unicode61's default
# categories L*, N*, Co); inside a word the combining diacritical marks belong to it too.
_START = r"[^\W_]|[\ue000-\uf8ff]"
_WORD = re.compile(rf"(?:{_START})(?:{_START}|[\u0300-\u036f])*")
# In ASCII text those are the runs of letters and digits (what the class above
# matches there), and folding is lowering: a faster scan for the usual text.
_ASCII_WORD = re.compile(r"[A-Za-z0-9]+")
_FOLDED: dict[str, str] = {}  # raw word -> term; bounded by _FOLDED_KEPT
_FOLDED_KEPT = 200_000
STEMMER = "english"  # Snowball's name; part of the store's tokenizer version
_stemmers = threading.local()  # a Snowball stemmer keeps its word as state: one per thread


@functools.cache
def tokenizer_version() -> str:
    """What `tokens` depends on: the word rules, Python's Unicode tables (which say what
    a letter is) and the stemmer's release. A store indexed under another version is
    re-indexed when opened: its delete trigger finds a memory's postings by tokenizing
    the memory again, so the tokenizer must not change under an index."""
    return f"unicode61-rd2/unicode-{unicodedata.unidata_version}/{_stemmer_release()}"


def _stemmer_release() -> str:
    """Which stemmer stems, and its release. snowballstemmer hands the work to PyStemmer
    (the C libstemmer, of its own release) whenever that is installed, so installing
    or upgrading PyStemmer beside a store can change its stems as much as a new
    snowballstemmer does."""
    if getattr(snowballstemmer.stemmer, "__module__", "").split(".")[0] == "Stemmer":
        return f"pystemmer-{STEMMER}-{importlib.metadata.version('PyStemmer')}"
    return f"snowball-{STEMMER}-{importlib.metadata.version('snowballstemmer')}"


def stem(word: str) -> str:
    """The Snowball English stem of a lower-case word."""
    stemmer = getattr(_stemmers, "stemmer", None)
    if stemmer is None:
        stemmer = _stemmers.stemmer = snowballstemmer.stemmer(STEMMER)
    return str(stemmer.stemWord(word))


def _fold_char(c: str) -> str:
    """Lower case, and a Latin letter's diacritics removed (remove_diacritics 2)."""
    lowered = c.lower()
    if lowered == c and len(c.casefold()) == 1:
        lowered = c.casefold()  # simple case folding, as FTS5's: micro sign -> mu
    out: list[str] = []
    for ch in lowered:
        if 0x300 <= ord(ch) <= 0x36F:
            continue  # a combining diacritic folds to nothing
        decomposed = unicodedata.normalize("NFD", ch)
        base = decomposed[0]
        if base.isascii() and all(unicodedata.combining(d) for d in decomposed[1:]):
            out.append(base)
        else:
            out.append(ch)
    return "".join(out)


def _term(word: str) -> str:
    term = _FOLDED.get(word)
    if term is None:
        folded = word.lower() if word.isascii() else "".join(_fold_char(c) for c in word)
        term = stem(folded)
        if len(_FOLDED) >= _FOLDED_KEPT:
            _FOLDED.clear()
        _FOLDED[word] = term
    return term


def _words(text: str) -> list[str]:
    """The words of `text`, in order; those of ASCII text already lower case."""
    if text.isascii():
        return _ASCII_WORD.findall(text.lower())
    return _WORD.findall(text)


def tokens(text: str) -> list[str]:
    """Every indexed term of `text`, in order, repeats included."""
    known = _FOLDED.get
    return [known(word) or _term(word) for word in _words(text)]


def query_terms(text: str) -> list[str]:
    """The distinct terms of a query, in order, at most MAX_QUERY_TERMS of them."""
    terms: list[str] = []
    for term in tokens(text):
        if term not in terms:
            terms.append(term)
            if len(terms) == MAX_QUERY_TERMS:
                break
    return terms


def term_counts(text: str) -> dict[str, int]:
    """How often each term occurs in `text` (a document's term frequencies), in the
    order of their first occurrence.

    The index's write path calls this once per memory: the words are counted first
    (C code), and each distinct word is folded and stemmed through the cache."""
    counts: dict[str, int] = {}
    known = _FOLDED.get
    for word, n in Counter(_words(text)).items():
        term = known(word) or _term(word)
        counts[term] = counts.get(term, 0) + n
    return counts


@dataclass(frozen=True)
class LexicalStatistics:
    """One namespace's lexical statistics for a query's terms.

    `documents` counts the namespace's live memories (every tier), `tokens` their
    terms in all, `frequencies` how many of the documents hold each query term (0 if
    none). The ranking may use them directly (e.g. `idf`) with no other namespace
    leaking in.
    """

    documents: int = 0
    tokens: int = 0
    frequencies: Mapping[str, int] = field(default_factory=dict)

    @property
    def average_length(self) -> float:
        return self.tokens / self.documents if self.documents else 0.0

    def idf(self, term: str) -> float:
        """FTS5's idf: log((N - n + 0.5) / (n + 0.5)), at least 1e-6."""
        n = self.frequencies.get(term, 0)
        value = math.log((self.documents - n + 0.5) / (n + 0.5))
        return value if value > 0.0 else MIN_IDF


def bm25(
    stats: LexicalStatistics,
    terms: Sequence[str],
    term: npt.NDArray[np.int64],
    document: npt.NDArray[np.int64],
    frequency: npt.NDArray[np.int64],
    length: npt.NDArray[np.int64],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
    """BM25 of every document that holds one of `terms`, from its postings as arrays
    (posting i: query term number `term[i]` in `document[i]`, `frequency[i]` times, the
    document `length[i]` terms long; one posting per term and document). Returns the
    documents (ascending) and their scores.

    Each term's part is computed by the operations FTS5's formula performs, in its
    order, and a document's parts are summed term by term in the order of `terms`
    (floating-point sums depend on their order; this one is fixed by the query): the
    floats equal FTS5's bm25() (tests/unit/test_lexicon.py). Arrays, not a loop: a
    search reads up to ~1,000 postings, and a Python loop with a tuple each was about a
    third of a lexical search."""
    tf, dl = frequency.astype(np.float64), length.astype(np.float64)
    idf = np.array([stats.idf(t) for t in terms], dtype=np.float64)[term]
    avgdl = stats.average_length or 1.0
    k1_plus_1, one_minus_b = K1 + 1.0, 1 - B  # the same floats the formula computes
    part = idf * (tf * k1_plus_1) / (tf + K1 * (one_minus_b + B * dl / avgdl))
    documents, slot = np.unique(document, return_inverse=True)
    total = np.zeros(documents.size, dtype=np.float64)
    for i in range(len(terms)):  # term by term: 0.0 + first + second ...
        mine = term == i
        total[slot[mine]] += part[mine]
    return documents, total
