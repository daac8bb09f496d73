"""`tiered-memory backup DEST` and `tiered-memory verify`, with their exit codes:
backup 0 done / 1 failed; verify 0 all verified / 3 problems found / 1 could not check."""

from __future__ import annotations

import json
from pathlib import Path

from tiered_memory import HashingEmbedder, ManualClock, TieredMemory

from .conftest import PAST, Cli, Seeded


def _archive_one(cli: Cli, seeded: Seeded) -> str:
    mem = TieredMemory.embedded(cli.db, embedder=HashingEmbedder(), clock=ManualClock(PAST))
    try:
        assert mem.archive([seeded.ids["parking"]]) == 1
    finally:
        mem.close()
    return seeded.ids["parking"]


def test_backup_then_verify_the_copy(cli: Cli, seeded: Seeded, tmp_path: Path) -> None:
    archived = _archive_one(cli, seeded)
    report = cli.json("backup", str(tmp_path / "bk"))
    copy = tmp_path / "bk" / "memory.db"
    assert report == {
        "database": str(copy),
        "archive": str(tmp_path / "bk" / "memory.db.archive"),
        "namespaces": 1,
        "archives": 1,
        "bytes": report["bytes"],
    }
    assert cli.json("verify", db=copy) == {
        "ok": True,
        "database": str(copy),
        "archives": 1,
        "problems": [],
    }
    assert "Trinity centre" in cli.json("expand", archived, db=copy)["content"]
    assert sorted(m["id"] for m in cli.json("list", db=copy)) == sorted(
        i for i in seeded.ids.values() if i != archived
    )
    shown = cli("backup", str(tmp_path / "bk2")).stdout
    assert "backed up" in shown
    assert "1 archived original(s)" in shown


def test_backup_refuses_a_used_folder_and_a_missing_store(cli: Cli, tmp_path: Path) -> None:
    used = tmp_path / "used"
    used.mkdir()
    (used / "notes.txt").write_text("mine")
    cli("add", "something")
    result = cli("backup", str(used), ok=False)
    assert result.exit_code == 1
    assert "not an empty folder" in result.stderr
    assert sorted(p.name for p in used.iterdir()) == ["notes.txt"]
    missing = cli("backup", str(tmp_path / "b"), db=tmp_path / "nope.db", ok=False)
    assert missing.exit_code == 1
    assert "no store at" in missing.stderr
    assert not (tmp_path / "nope.db").exists()  # not created by looking


def test_verify_reports_a_damaged_original_with_exit_3(cli: Cli, seeded: Seeded) -> None:
    archived = _archive_one(cli, seeded)
    assert cli("verify").stdout.startswith("verified ")
    (original,) = (cli.db.parent / "memory.db.archive").rglob("*.json")
    original.write_bytes(original.read_bytes().replace(b"Trinity", b"Tr1nity"))
    result = cli("verify", ok=False)
    assert result.exit_code == 3
    assert archived in result.stdout
    assert "does not match its record" in result.stdout
    as_json = cli("verify", "--json", ok=False)
    assert as_json.exit_code == 3
    report = json.loads(as_json.stdout)
    assert report["ok"] is False
    assert len(report["problems"]) == 1


def test_verify_reports_a_damaged_file_with_exit_3(cli: Cli, seeded: Seeded) -> None:
    data = bytearray(cli.db.read_bytes())
    page = 4096
    data[page * 2 : page * 4] = b"\xff" * (page * 2)
    cli.db.write_bytes(bytes(data))
    result = cli("verify", "--json", ok=False)
    assert result.exit_code == 3
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert report["problems"]


def test_verify_of_an_empty_or_missing_file(cli: Cli, tmp_path: Path) -> None:
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    result = cli("verify", db=empty, ok=False)
    assert result.exit_code == 3
    assert "empty file" in result.stdout
    missing = cli("verify", db=tmp_path / "missing.db", ok=False)
    assert missing.exit_code == 1
    assert "no store at" in missing.stderr
    assert not (tmp_path / "missing.db").exists()
