"""The sync facade shows the engine's real signatures (issue 20, item 4).

`TieredMemory`'s methods used to be generated wrappers taking `(*args, **kwargs)`:
help() recovered the parameters through `__wrapped__`, but IDEs, type checkers and
Jupyter's completion saw none. Now each is written out, so this test holds every public
coroutine of `AsyncTieredMemory` to a facade method with the same parameters (names,
kinds, defaults and annotations), read from the facade's own code (never through
`__wrapped__`), and a docstring.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from tiered_memory import AsyncTieredMemory, TieredMemory

# Constructors return their own class; everything else returns the same value.
RETURNS_OWN_CLASS = frozenset({"embedded", "from_config", "from_env", "from_settings"})


def _public_coroutines() -> list[str]:
    return sorted(
        name
        for name, value in inspect.getmembers(AsyncTieredMemory)
        if not name.startswith("_") and inspect.iscoroutinefunction(value)
    )


def _own_signature(method: Callable[..., Any]) -> inspect.Signature:
    return inspect.signature(method, follow_wrapped=False)


def test_the_engine_has_public_coroutines() -> None:
    assert {"add", "search", "recall", "maintain", "from_settings"} <= set(_public_coroutines())


@pytest.mark.parametrize("name", _public_coroutines())
def test_each_coroutine_has_a_facade_twin_with_its_parameters(name: str) -> None:
    engine = getattr(AsyncTieredMemory, name)
    facade = getattr(TieredMemory, name, None)
    assert facade is not None, f"TieredMemory has no {name}()"
    assert not hasattr(facade, "__wrapped__"), f"TieredMemory.{name} is a generated wrapper"
    # The engine's coroutines may carry a span decorator (functools.wraps and a ParamSpec
    # keep their signature for help() and type checkers); the facade's must be its own.
    theirs, ours = inspect.signature(engine), _own_signature(facade)
    assert list(ours.parameters.values()) == list(theirs.parameters.values()), name
    if name not in RETURNS_OWN_CLASS:
        assert ours.return_annotation == theirs.return_annotation, name
    assert inspect.getdoc(facade), f"TieredMemory.{name} has no docstring"


def test_every_public_facade_method_has_a_docstring() -> None:
    undocumented = [
        name
        for name, value in vars(TieredMemory).items()
        if not name.startswith("_")
        and (inspect.isfunction(value) or isinstance(value, (classmethod, property)))
        and not inspect.getdoc(getattr(TieredMemory, name))
    ]
    assert undocumented == []


def test_help_shows_the_parameters_not_args_and_kwargs() -> None:
    shown = str(_own_signature(TieredMemory.search))
    assert "*args" not in shown
    assert "budget_tokens" in str(_own_signature(TieredMemory.recall))
    assert "k: 'int' = 10" in shown
    assert TieredMemory.search.__doc__ == AsyncTieredMemory.search.__doc__


def test_the_twins_forward_every_argument(tmp_path: Any) -> None:
    """A written-out twin that dropped an argument would pass the signature check."""
    from tiered_memory import HashingEmbedder, MemoryType, Tier

    with TieredMemory.embedded(tmp_path / "m.db", embedder=HashingEmbedder()) as mem:
        m = mem.add(
            "Ava is seven",
            namespace="u1",
            memory_type=MemoryType.FACTUAL,
            importance=0.9,
            metadata={"k": 1},
            source="test",
            pinned=True,
            id="ava",
        )
        assert (m.id, m.namespace, m.memory_type, m.importance) == (
            "ava",
            "u1",
            MemoryType.FACTUAL,
            0.9,
        )
        assert (m.metadata, m.source, m.pinned) == ({"k": 1}, "test", True)
        assert mem.dimension() == HashingEmbedder().dimension
        assert [h.memory.id for h in mem.search("Ava", namespace="u1", k=1)] == ["ava"]
        assert list(mem.search("Ava", namespace="u2")) == []  # namespaces never leak
        assert mem.list(namespace="u1", tier=Tier.HOT, limit=1)[0].id == "ava"
        assert mem.namespaces(prefix="u") == ["u1"]


def test_validation_error_has_an_alias_that_does_not_clash_with_pydantics(
    tmp_path: Any,
) -> None:
    import pydantic

    import tiered_memory
    from tiered_memory import HashingEmbedder

    assert tiered_memory.MemoryValidationError is tiered_memory.ValidationError
    assert tiered_memory.MemoryValidationError is not pydantic.ValidationError
    assert "MemoryValidationError" in tiered_memory.__all__
    with (
        TieredMemory.embedded(tmp_path / "m.db", embedder=HashingEmbedder()) as mem,
        pytest.raises(tiered_memory.MemoryValidationError, match="namespace"),
    ):
        mem.add("noted", namespace="")
