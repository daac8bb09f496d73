"""`tiered-memory stats` shows the seed-001 dashboard numbers, and `archive --preview`
and `maintain` show archival's cost in money (issue 21, item 2)."""

from __future__ import annotations

from pathlib import Path

from tiered_memory import HashingEmbedder, TieredMemory

from .conftest import Cli, Seeded

PRICED = """
[summarizer]
backend = "anthropic"
[summarizer.anthropic]
api_key = "sk-test-never-sent"
[policy.archival.prices."claude-haiku"]
input_usd_per_million = 1000
output_usd_per_million = 2000
"""


def test_stats_shows_the_dashboard_numbers(cli: Cli, seeded: Seeded) -> None:
    parking = seeded.ids["parking"]
    assert cli.json("archive", parking)["archived"] == [parking]
    cli("expand", parking)
    cli("maintain")

    stats = cli.json("stats")
    assert stats["object_store_bytes"] > 0
    assert stats["expansions_30d"] == 1
    archived = stats["tiers"]["archived"]["count"]  # the sweep archives old ones too
    assert stats["expansion_rate_30d"] == 1 / archived
    assert stats["last_sweep"]["dry_run"] is False
    assert stats["summarizer"]["calls"] == archived
    assert stats["summarizer"]["cost_usd"] == 0.0  # extractive
    text = cli("stats").stdout
    assert "expansions (30 d) 1" in text
    assert "object store" in text
    assert "last sweep 20" in text  # its time, ISO 8601
    assert f"summariser {archived} call(s)" in text


def test_archive_preview_and_dry_run_show_the_cost(
    cli: Cli, seeded: Seeded, tmp_path: Path
) -> None:
    config = tmp_path / "priced.toml"
    config.write_text(PRICED, encoding="utf-8")
    preview = cli.json("archive", "--older-than", "30d", "--preview", "--config", str(config))
    est = preview["estimate"]
    expected = (est["input_tokens"] * 1000 + est["output_tokens"] * 2000) / 1_000_000
    assert est["cost_usd"] > 0
    assert abs(est["cost_usd"] - expected) < 1e-9
    text = cli("archive", "--older-than", "30d", "--preview", "--config", str(config)).stdout
    assert f"~${expected:.2f}" in text
    # nothing was sent: the preview only estimates
    mem = TieredMemory.embedded(cli.db, embedder=HashingEmbedder())
    try:
        assert mem.stats().summarizer.calls == 0
    finally:
        mem.close()
    cli("demote", seeded.ids["parking"], "cold")  # old, unimportant and COLD: due
    dry = cli.json("maintain", "--dry-run", "--config", str(config))
    assert dry["archive_estimate"]["cost_usd"] > 0
    assert "output tokens" in (
        shown := cli("maintain", "--dry-run", "--config", str(config)).stdout
    )
    assert "~$" in shown
