"""Memory content cannot drive the terminal (issue 16, item 10).

Memories holding ESC sequences (window title, clear screen, clipboard), BEL, CR, a C1
CSI and rich markup go through every command that prints stored text, as tables and
as --json. Before, they reached the terminal raw: `list` retitled the window and
cleared the screen. Now the human output shows them escaped (`\\x1b`), and the JSON
output escapes them too, while still parsing back to the exact content.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import Result

from tiered_memory import HashingEmbedder, ManualClock, TieredMemory

from .conftest import PAST, Cli

HOSTILE = {
    "title": "pwned title \x1b]0;you have been pwned\x07 after",
    "clear": "pwned clear \x1b[2J\x1b[H screen wiped",
    "clipboard": "pwned clipboard \x1b]52;c;ZWNobyBldmls\x1b\\ copied",
    "overwrite": "pwned overwrite harmless\rEVIL LINE",
    "c1": "pwned c1 \x9b31m red via CSI \x9d0;title\x9c",
    "delete": "pwned delete \x7f\x08\x08 back",
    "markup": "pwned markup [link=https://evil.example]click[/link] [bold red]loud[/]",
    "bidi": "pwned bidi \u202egnp.exe\u202c and \u2067isolate\u2069 \u200f mark",
}
# What a terminal acts on: every C0 control but newline, DEL and C1 (tab is harmless),
# and what reorders what it shows: the bidi controls ("Trojan Source").
RAW_CONTROL = re.compile(
    "[\\x00-\\x08\\x0b-\\x1f\\x7f-\\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]"
)


def _safe(result: Result) -> str:
    shown = result.stdout + result.stderr
    found = sorted({f"{ord(c):#04x}" for c in RAW_CONTROL.findall(shown)})
    assert not found, f"raw control characters reached the terminal: {found}\n{shown!r}"
    return shown


def _seed(db: Path) -> dict[str, str]:
    mem = TieredMemory.embedded(db, embedder=HashingEmbedder(), clock=ManualClock(PAST))
    try:
        ids = {name: mem.add(text, importance=0.9).id for name, text in HOSTILE.items()}
        archived = mem.add("pwned archived \x1b]0;title from the archive\x07 gone", importance=0.1)
        assert mem.archive([archived.id], reason="old \x1b[2J reason") == 1
        ids["archived"] = archived.id
    finally:
        mem.close()
    return ids


def test_human_output_escapes_control_characters(cli: Cli) -> None:
    ids = _seed(cli.db)
    listed = _safe(cli("list"))
    assert "\\x1b]0;you have" in listed  # shown, not executed
    assert "[link=https://evil.example]click[/link]" in listed  # markup shown as text
    assert "\\x9b31m" in _safe(cli("search", "pwned", "-k", "20"))
    assert "pwned bidi \\u202egnp.exe\\u202c and \\u2067isolate\\u2069" in listed
    titled = _safe(cli("search", "pwned \x1b]0;query title\x07", "--deep"))
    assert "\\x1b]0;query title\\x07" in titled
    recalled = _safe(cli("recall", "pwned overwrite harmless", "--budget", "2000"))
    assert "pwned overwrite harmless" in recalled  # the CR never reaches the terminal
    expanded = _safe(cli("expand", ids["archived"]))
    assert "\\x1b]0;title from the archive\\x07" in expanded
    assert "old \\x1b[2J reason" in expanded
    assert "\\x1b]0;added title" in _safe(cli("add", "new \x1b]0;added title\x07 memory"))
    assert ids["archived"] in _safe(cli("list", "--tier", "archived"))
    _safe(cli("explain", ids["title"], "--query", "pwned \x1b[2J"))
    _safe(cli("archive", ids["clear"], "--preview"))


def test_json_output_is_escaped_and_parses_back_to_the_content(cli: Cli) -> None:
    ids = _seed(cli.db)
    by_id = {ids[name]: text for name, text in HOSTILE.items()}
    listed = cli("list", "--json")
    _safe(listed)
    assert {m["id"]: m["content"] for m in json.loads(listed.stdout)} == by_id
    hits = cli("search", "pwned", "-k", "20", "--json")
    _safe(hits)
    found = {h["id"]: h["memory"]["content"] for h in json.loads(hits.stdout)}
    found.pop(ids["archived"], None)  # its summary may join (archived, marked)
    assert found == by_id
    recalled = cli("recall", "pwned", "--budget", "4000", "--json")
    _safe(recalled)
    document = json.loads(recalled.stdout)
    assert {h["memory"]["content"] for h in document["items"]} >= set(by_id.values())
    assert "\x1b]0;you have been pwned\x07" in document["text"]
    expanded = cli("expand", ids["archived"], "--json")
    _safe(expanded)
    assert "\x1b]0;title from the archive\x07" in json.loads(expanded.stdout)["content"]
    exported = cli("export")  # JSON on stdout
    _safe(exported)
    contents = {m["content"] for m in json.loads(exported.stdout)["memories"]}
    assert set(by_id.values()) <= contents


def test_error_messages_escape_what_they_quote(cli: Cli, tmp_path: Path) -> None:
    """A file name is quoted as given in the one-line error of a failed write."""
    _seed(cli.db)
    target = tmp_path / "no-such-folder-\x1b]0;pwned\x07" / "out.json"
    result = cli("export", "-o", str(target), ok=False)
    assert result.exit_code == 1
    assert "no-such-folder-\\x1b]0;pwned\\x07" in _safe(result)
