"""docs/design.md lives with the code: its defaults table (section 13) is what `Policy()`
is, each row's module holds the rule (it exists and reads the setting), and every setting
the document names elsewhere has a row. A default changed in `policy.py`, or a rule moved
to another module, fails here until the document says so."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from tiered_memory.config import parse_duration
from tiered_memory.policy import Policy

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
PACKAGE = ROOT / "core" / "tiered_memory"

_DURATION = re.compile(r"\d+(?:\.\d+)?[wdhms]")
_FRACTION = re.compile(r"(\d+(?:\.\d+)?)/(\d+(?:\.\d+)?)")


@dataclass(frozen=True)
class Row:
    setting: str
    default: str
    module: str


def defaults_table(text: str) -> list[Row]:
    """The rows of the table under the "Defaults" heading."""
    heading = re.search(r"^## \d+\. Defaults$", text, re.M)
    assert heading is not None, "docs/design.md has no '## N. Defaults' section"
    section = text[heading.end() :]
    following = re.search(r"^## ", section, re.M)
    section = section[: following.start()] if following else section
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if not line.startswith("| `"):
            continue
        assert len(cells) == 4, line
        setting, default, _rule, module = cells
        rows.append(Row(setting.strip("`"), default, module.strip("`")))
    return rows


def resolve(setting: str) -> tuple[Any, str]:
    """The value of a dotted setting in `Policy()`, and the field's name (a dict entry,
    such as a half-life by type, is named by its dict field)."""
    value: Any = Policy()
    field = ""
    for part in setting.split("."):
        if isinstance(value, BaseModel):
            if part not in type(value).model_fields:
                raise KeyError(f"{setting}: Policy has no field {part!r} here")
            value, field = getattr(value, part), part
        elif isinstance(value, dict):
            keys = {(k.value if isinstance(k, Enum) else str(k)): k for k in value}
            if part not in keys:
                raise KeyError(f"{setting}: no entry {part!r}; entries are {sorted(keys)}")
            value = value[keys[part]]
        else:
            raise KeyError(f"{setting}: {part!r} is past a plain value")
    return value, field


def parse_default(text: str) -> Any:
    """A default as the table writes it: none, true/false, a duration as in TOML (72h),
    a fraction (1/1.2), or a number."""
    if text == "none":
        return None
    if text in ("true", "false"):
        return text == "true"
    if _DURATION.fullmatch(text):
        return parse_duration(text)
    fraction = _FRACTION.fullmatch(text)
    if fraction:
        return float(fraction.group(1)) / float(fraction.group(2))
    return float(text) if "." in text else int(text)


def same(documented: Any, actual: Any) -> bool:
    if isinstance(actual, bool) or actual is None or isinstance(documented, bool):
        return documented is actual
    if isinstance(actual, (int, float)) and isinstance(documented, (int, float)):
        return math.isclose(documented, actual, rel_tol=1e-12, abs_tol=0.0)
    return bool(documented == actual)


def module_source(module: str) -> str:
    base = PACKAGE.joinpath(*module.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.is_file():
            return path.read_text(encoding="utf-8")
    raise FileNotFoundError(f"no module tiered_memory.{module}")


ROWS = defaults_table(DESIGN.read_text(encoding="utf-8"))


def test_the_table_is_there_and_lists_each_setting_once() -> None:
    settings = [row.setting for row in ROWS]
    assert len(settings) >= 50
    assert len(settings) == len(set(settings)), "a setting is listed twice"


@pytest.mark.parametrize("row", ROWS, ids=[row.setting for row in ROWS])
def test_each_documented_default_is_the_policy_default(row: Row) -> None:
    actual, _ = resolve(row.setting)
    documented = parse_default(row.default)
    assert same(documented, actual), (
        f"docs/design.md says {row.setting} = {row.default}, Policy() has {actual!r}"
    )


@pytest.mark.parametrize("row", ROWS, ids=[row.setting for row in ROWS])
def test_each_rule_is_in_the_module_named(row: Row) -> None:
    _, field = resolve(row.setting)
    source = module_source(row.module)
    assert re.search(rf"\b{field}\b", source), (
        f"docs/design.md says tiered_memory.{row.module} holds {row.setting}, "
        f"but it never reads {field}"
    )


def test_every_setting_the_design_names_is_in_the_table() -> None:
    text = DESIGN.read_text(encoding="utf-8")
    listed = {row.setting for row in ROWS}
    named = set()
    for span in re.findall(r"`([^`\n]+)`", text):
        for name in re.findall(r"\b[a-z_]+(?:\.[a-z_]+)+\b", span):
            try:
                resolve(name)
            except KeyError:
                continue  # a module or a function (budget.pack), not a setting
            named.add(name)
    missing = {
        name
        for name in named
        if name not in listed and not any(s.startswith(name + ".") for s in listed)
    }
    assert named, "the design names no setting at all: is the parsing broken?"
    assert missing == set()


@pytest.mark.parametrize(
    ("text", "expected"),
    [("none", None), ("true", True), ("72h", parse_duration("72h")), ("1/1.2", 1 / 1.2)],
)
def test_the_table_syntax(text: str, expected: Any) -> None:
    assert parse_default(text) == expected


def test_a_wrong_default_or_module_is_caught() -> None:
    """The checks above on a table that lies."""
    rows = defaults_table("## 1. Defaults\n\n| `tiers.hot_ttl` | 48h | x | `decay` |\n")
    (row,) = rows
    actual, field = resolve(row.setting)
    assert not same(parse_default(row.default), actual)
    assert not re.search(rf"\b{field}\b", module_source(row.module))
    with pytest.raises(KeyError):
        resolve("tiers.hot_tll")
