"""The BLAS threads the products of `tiered_memory.clusters` run on (tests that check
small products run on one thread, `clusters.one_blas_thread`)."""

from __future__ import annotations

import pytest

from tiered_memory import clusters


def blas_threads() -> int:
    """The BLAS threads now (the most of the BLAS libraries `clusters` limits: those
    loaded when it first looked, numpy's among them; a library loaded later for
    another's own products, such as faiss's OpenBLAS, is not theirs); skips the test
    where threadpoolctl sees no BLAS library it can limit."""
    pytest.importorskip("threadpoolctl")
    controller = clusters.blas_controller()
    blas = controller.select(user_api="blas").info() if controller is not None else []
    if not blas:
        pytest.skip("no BLAS library threadpoolctl can limit")
    return int(max(p["num_threads"] for p in blas))


def blas_threads_of(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The BLAS threads each `clusters.tile` product runs on, from now on."""
    blas_threads()  # skips here, before anything is patched
    threads: list[int] = []
    tile = clusters.tile

    def counted(rows: clusters.Matrix, cols: clusters.Matrix) -> clusters.Matrix:
        threads.append(blas_threads())
        return tile(rows, cols)

    monkeypatch.setattr(clusters, "tile", counted)
    return threads
