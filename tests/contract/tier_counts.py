"""The kept memories per (namespace, tier) of an embedded store's file, checked."""

from __future__ import annotations

import sqlite3


def kept_tier_counts(conn: sqlite3.Connection) -> dict[tuple[str, str], int]:
    """The non-zero counts of `tier_rows`, asserted equal to a count of `memories`."""
    kept = {
        (ns, tier): rows
        for ns, tier, rows in conn.execute("SELECT namespace, tier, rows FROM tier_rows")
        if rows
    }
    true = {
        (ns, tier): rows
        for ns, tier, rows in conn.execute(
            "SELECT namespace, tier, count(*) FROM memories GROUP BY 1, 2"
        )
    }
    assert kept == true
    return kept
