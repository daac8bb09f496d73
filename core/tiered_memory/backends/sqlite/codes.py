"""The summary embedding of an archive record as a ternary code, and the cache
partition that searches the codes.

An archive record exists so that an archived memory stays findable at a fraction of
the cost of a live one (seed 001: "~85 % smaller"), so its summary embedding is kept
as a ternary code (`encode_code`): each dimension -1, 0 or +1 times one scale, 5
dimensions a byte (77 bytes for 384-d instead of 1,536 as float32). The support is the
k largest magnitudes, k chosen to maximise the cosine between the vector and its code
("fidelity", about 0.9 for dense sentence embeddings, 1.0 for vectors with a single
magnitude such as axis vectors). Search scores the cached codes and divides by the
record's fidelity (`CalibratedIndex`), which makes the score an unbiased estimate of
the cosine to the float vector (mean error 0.017 on LoCoMo with MiniLM, against 0.053
uncalibrated); a query equal to the summary's own embedding scores 1.0 on its own
record. The port hands back the dequantised vector (scale x code), which is exact for
single-magnitude vectors.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import numpy as np

from tiered_memory.errors import ValidationError
from tiered_memory.ports import Matrix, Vector

from .vectors import VectorIndex

# scale (float32), fidelity (uint8, 1/255 steps: far finer than the estimate's own
# error), then the trits. The dimension is the store's (meta); the layout is the
# schema version's (`migrations`).
_HEADER = struct.Struct("<fB")
_TRITS = 5  # dimensions per byte: 3**5 = 243 <= 256
_POWERS = 3 ** np.arange(_TRITS, dtype=np.int64)


def code_size(dimension: int) -> int:
    return _HEADER.size + -(-dimension // _TRITS)


def encode_code(vector: Vector) -> bytes:
    """The ternary code of a finite vector (see the module docstring)."""
    v = np.asarray(vector, dtype=np.float64)
    magnitude = np.abs(v)
    order = np.argsort(-magnitude, kind="stable")
    sums = np.cumsum(magnitude[order])
    norm = float(np.linalg.norm(v))
    trits = np.zeros(v.size, dtype=np.int64)
    if norm == 0.0:
        scale, fidelity = 0.0, 1.0
    else:
        # cos(v, code of the k largest) = sums[k-1] / (sqrt(k) * |v|): maximise over k.
        k = int(np.argmax(sums / np.sqrt(np.arange(1, v.size + 1)))) + 1
        support = order[:k]
        trits[support] = np.where(v[support] > 0, 1, -1)
        scale = float(sums[k - 1]) / k  # least squares: the mean kept magnitude
        fidelity = min(1.0, float(sums[k - 1]) / (np.sqrt(k) * norm))
    digits = np.ones(-(-v.size // _TRITS) * _TRITS, dtype=np.int64)
    digits[: v.size] = trits + 1
    packed = (digits.reshape(-1, _TRITS) * _POWERS).sum(axis=1).astype(np.uint8)
    level = max(1, round(fidelity * 255))
    return _HEADER.pack(scale, level) + bytes(packed.tobytes())


def _header(code: bytes, dimension: int) -> tuple[float, float]:
    """(scale, fidelity) of a code of a `dimension`-d vector."""
    if len(code) != code_size(dimension):
        raise ValidationError(
            f"a summary-embedding code of {len(code)} bytes is not one of a {dimension}-d vector"
        )
    scale, level = _HEADER.unpack_from(code)
    return float(scale), level / 255


def _trits(payload: bytes, rows: int, dimension: int) -> Matrix:
    packed = np.frombuffer(payload, dtype=np.uint8).astype(np.int64).reshape(rows, -1)
    digits = (packed[:, :, None] // _POWERS) % 3
    out: Matrix = (digits.reshape(rows, -1)[:, :dimension] - 1).astype(np.float32)
    return out


def decode_code(code: bytes, dimension: int) -> tuple[Vector, float]:
    """The dequantised vector (scale x code) and the code's fidelity."""
    scale, fidelity = _header(code, dimension)
    vector: Vector = _trits(code[_HEADER.size :], 1, dimension)[0] * np.float32(scale)
    return vector, fidelity


def fidelity_of(code: bytes, dimension: int) -> float:
    return _header(code, dimension)[1]


def decode_directions(codes: Sequence[bytes], dimension: int) -> Matrix:
    """The codes of many records as rows of -1/0/+1 (their directions), vectorised."""
    if not codes:
        return np.zeros((0, dimension), dtype=np.float32)
    for code in codes:
        _header(code, dimension)
    payload = b"".join(code[_HEADER.size :] for code in codes)
    return _trits(payload, len(codes), dimension)


# ids, summary codes, and the filter facts the cache keeps beside them (`flags_of`
# of the record's flags, unknown read as unset; `TYPE_CODES` of its memory type)
CodeRows = tuple[list[str], list[bytes], list[int], list[int]]


class CalibratedIndex(VectorIndex):
    """The archive partition of the vector cache: each row is the unit direction of a
    code divided by the code's fidelity, so the dot product with a unit query is the
    calibrated cosine estimate itself, and ranking by it is exact (no re-ranking)."""

    @classmethod
    def of_codes(cls, dimension: int, rows: CodeRows) -> VectorIndex:
        ids, codes, flags, types = rows
        n = len(ids)
        index = cls.build(dimension, ids, decode_directions(codes, dimension), flags, types)
        index._vectors[:n] /= _fidelities(codes, dimension)[:, None]
        return index

    def add_codes(self, rows: CodeRows) -> None:
        ids, codes, flags, types = rows
        if not ids:
            return
        directions = decode_directions(codes, self.dimension)
        for memory_id, direction, fidelity, flag, type_code in zip(
            ids, directions, _fidelities(codes, self.dimension), flags, types, strict=True
        ):
            self.add(memory_id, direction, flag, type_code)
            self._vectors[self._pos[memory_id]] /= fidelity


def _fidelities(codes: Sequence[bytes], dimension: int) -> Matrix:
    out: Matrix = np.array([fidelity_of(c, dimension) for c in codes], dtype=np.float32)
    return out
