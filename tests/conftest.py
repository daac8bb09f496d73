"""What the default run (`tox`, plain `pytest`) leaves out, and how to ask for it:

- `--matrix`: tests marked `matrix` on every backend combination, not only on the
  embedded default (tests/matrix.py);
- `-m soak`: long fault-injection variants.
"""

from __future__ import annotations

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--matrix",
        action="store_true",
        default=False,
        help="run tests marked matrix on every backend combination (tests/matrix.py)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Soak variants run only when asked for (`-m soak`); the default run stays fast."""
    if "soak" in (config.getoption("markexpr") or ""):
        return
    soak = [item for item in items if item.get_closest_marker("soak") is not None]
    if soak:
        config.hook.pytest_deselected(items=soak)
        items[:] = [item for item in items if item.get_closest_marker("soak") is None]
