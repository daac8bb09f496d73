"""The embedded AssociationGraph: a `links` table in the store's SQLite file.

    store = await SQLiteMemoryStore.open("memory.db")
    graph = SQLiteAssociationGraph(store.database)   # same file, same transactions

Each link is stored as two rows, a->b and b->a, written together with equal values.
That doubles the rows but makes "links of x" and every traversal step one primary-key
prefix lookup, whichever side a link was created from. Neighbours come from one
recursive CTE bounded by the (allow-listed) depth; the best path per node is picked
with a window function, so ties resolve the same way every time.
"""

from __future__ import annotations

import functools
import json
import math
import sqlite3
from collections.abc import Iterable, Sequence
from datetime import datetime
from os import PathLike
from typing import Any

from tiered_memory.epoch import from_micros_or_none, to_micros_or_none
from tiered_memory.errors import ValidationError
from tiered_memory.models import Link, LinkKind, Neighbor
from tiered_memory.validation import check_id, check_k
from tiered_memory.validation import check_namespace as _check_namespace

from .bulk import insert_rows
from .database import DEFAULT_BUSY_TIMEOUT, SQLiteDatabase
from .sql import IN_JSON, json_list

DEPTHS = frozenset({1, 2, 3})

# Many rows per statement (`bulk.insert_rows`): the VALUES go between the two parts.
_UPSERT_HEAD = "INSERT INTO links (namespace, source, target, weight, kind, created_at, updated_at)"
_UPSERT_TAIL = """
ON CONFLICT (namespace, source, target) DO UPDATE SET
    kind = CASE WHEN excluded.weight > links.weight THEN excluded.kind ELSE links.kind END,
    updated_at = CASE WHEN excluded.weight > links.weight
        THEN coalesce(excluded.updated_at, links.updated_at) ELSE links.updated_at END,
    weight = max(links.weight, excluded.weight)
"""

# One statement for all pairs (a JSON list of [source, target]): a 20-item recall
# strengthens 190 links, 380 rows, and per-row executemany calls cost ~40 % more.
# (`WHERE true` lets SQLite parse the upsert after a SELECT.)
_STRENGTHEN = """
INSERT INTO links (namespace, source, target, weight, kind, created_at, updated_at)
SELECT :ns, json_extract(p.value, '$[0]'), json_extract(p.value, '$[1]'),
       min(1.0, :delta), :kind, :at, :at
FROM json_each(:pairs) AS p WHERE true
ON CONFLICT (namespace, source, target) DO UPDATE SET
    weight = min(1.0, links.weight + :delta),
    updated_at = :at
"""

# Paths never enter a seed: with weights <= 1, a path through another seed is never
# stronger than the same path started at that seed. Nor do they step straight back.
_NEIGHBORS = """
WITH RECURSIVE
    seeds (id) AS (SELECT value FROM json_each(:seeds)),
    walk (node, prev, seed, strength, depth) AS (
        SELECT l.target, l.source, l.source, l.weight, 1
        FROM links AS l
        WHERE l.namespace = :ns AND l.source IN (SELECT id FROM seeds)
          AND l.weight >= :min_weight
          AND l.target NOT IN (SELECT id FROM seeds)
        UNION ALL
        SELECT l.target, w.node, w.seed, w.strength * l.weight, w.depth + 1
        FROM walk AS w
        JOIN links AS l ON l.namespace = :ns AND l.source = w.node
        WHERE w.depth < :depth
          AND l.weight >= :min_weight
          AND l.target <> w.prev
          AND l.target NOT IN (SELECT id FROM seeds)
    ),
    ranked AS (
        SELECT node, seed, strength, depth,
               row_number() OVER (
                   PARTITION BY node ORDER BY strength DESC, depth, seed
               ) AS rank
        FROM walk
    )
SELECT node, seed, strength, depth FROM ranked WHERE rank = 1
ORDER BY strength DESC, node
LIMIT :limit
"""

_LINK_COLUMNS = "source, target, weight, kind, created_at, updated_at"


def _pair(source: str, target: str) -> tuple[str, str]:
    check_id(source)
    check_id(target)
    if source == target:
        raise ValidationError(f"a memory cannot be linked to itself ({source!r})")
    return (source, target) if source < target else (target, source)


def _pairs(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """`_pair` for many pairs, each distinct id checked once (a recall of 20 memories
    strengthens 190 pairs of the same 20 ids)."""
    checked: set[str] = set()
    out: list[tuple[str, str]] = []
    for source, target in pairs:
        for memory_id in (source, target):
            if not (isinstance(memory_id, str) and memory_id in checked):
                checked.add(check_id(memory_id))
        if source == target:
            raise ValidationError(f"a memory cannot be linked to itself ({source!r})")
        out.append((source, target) if source < target else (target, source))
    return out


def _link(row: sqlite3.Row) -> Link:
    return Link(
        source=row["source"],
        target=row["target"],
        weight=row["weight"],
        kind=LinkKind(row["kind"]),
        created_at=from_micros_or_none(row["created_at"]),
        updated_at=from_micros_or_none(row["updated_at"]),
    )


def _both_ways(rows: Iterable[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """(ns, a, b, ...) -> the row and its mirror (ns, b, a, ...)."""
    out: list[tuple[Any, ...]] = []
    for ns, a, b, *rest in rows:
        out.append((ns, a, b, *rest))
        out.append((ns, b, a, *rest))
    return out


class SQLiteAssociationGraph:
    """AssociationGraph in the store's SQLite file; build it on `store.database`."""

    def __init__(self, database: SQLiteDatabase, *, owns_database: bool = False) -> None:
        self._db = database
        self._owns_database = owns_database

    @classmethod
    async def open(
        cls,
        path: str | PathLike[str],
        *,
        verify: bool | None = None,
        busy_timeout: float = DEFAULT_BUSY_TIMEOUT,
    ) -> SQLiteAssociationGraph:
        """A graph with its own connection (when it is used without the store)."""
        database = await SQLiteDatabase.open(path, verify=verify, busy_timeout=busy_timeout)
        return cls(database, owns_database=True)

    @property
    def database(self) -> SQLiteDatabase:
        return self._db

    async def upsert_links(self, namespace: str, links: Sequence[Link]) -> None:
        ns = _check_namespace(namespace)
        best: dict[tuple[str, str], Link] = {}
        keys = _pairs((link.source, link.target) for link in links)  # each id checked once
        for key, link in zip(keys, links, strict=True):
            if key not in best or link.weight > best[key].weight:
                best[key] = link
        if not best:
            return
        # once per distinct timestamp: an add_many's auto-links all carry the call's
        # time (3,000 conversions a batch of 500)
        micros = functools.cache(to_micros_or_none)
        rows = [
            (
                ns,
                a,
                b,
                float(link.weight),
                LinkKind(link.kind).value,
                micros(link.created_at or link.updated_at),
                micros(link.updated_at or link.created_at),
            )
            for (a, b), link in best.items()
        ]
        # In key order: an add_many's mirror rows (b -> a) land all over the tree, and
        # inserting them sorted walks it front to back (3,000 rows of a batch of 500
        # took 9-14 ms unsorted, 5-7 sorted, on a copy of a 100k store).
        # The whole rows compare as their keys: one namespace, and each (a, b) once.
        both = _both_ways(rows)
        both.sort()
        await self._db.gate()
        with self._db.write() as conn:
            # each key once in `best`, so no statement holds a key twice
            insert_rows(conn, _UPSERT_HEAD, both, 7, _UPSERT_TAIL)

    async def strengthen(
        self, namespace: str, pairs: Sequence[tuple[str, str]], delta: float, when: datetime
    ) -> None:
        """Each distinct pair is strengthened once per call, however often it is listed."""
        ns = _check_namespace(namespace)
        if isinstance(delta, bool) or not isinstance(delta, (int, float)):
            raise ValidationError("delta must be a number between 0 and 1")
        if not math.isfinite(delta) or not 0.0 <= delta <= 1.0:
            raise ValidationError(f"delta must be between 0 and 1, got {delta!r}")
        keys = list(dict.fromkeys(_pairs(pairs)))
        if not keys:
            return
        params = {
            "ns": ns,
            "pairs": json.dumps([p for a, b in keys for p in ((a, b), (b, a))]),
            "delta": float(delta),
            "kind": LinkKind.CO_RECALLED.value,
            "at": to_micros_or_none(when),
        }
        await self._db.gate()
        # Co-recall strengthening is use bookkeeping (every recall does it): committed
        # without waiting for the disk, see SQLiteDatabase.write.
        with self._db.write(fsync=False) as conn:
            conn.execute(_STRENGTHEN, params)

    async def neighbors(
        self,
        namespace: str,
        seeds: Sequence[str],
        *,
        depth: int = 1,
        min_weight: float = 0.0,
        limit: int = 50,
    ) -> list[Neighbor]:
        """`min_weight` is per link: weaker links are not followed."""
        ns = _check_namespace(namespace)
        if isinstance(depth, bool) or depth not in DEPTHS:
            raise ValidationError(f"depth must be 1, 2 or 3, got {depth!r}")
        check_k(limit, "limit")
        if not math.isfinite(min_weight):
            raise ValidationError("min_weight must be a finite number")
        if not seeds:
            return []
        params = {
            "ns": ns,
            "seeds": json_list(dict.fromkeys(seeds)),
            "min_weight": float(min_weight),
            "depth": depth,
            "limit": limit,
        }
        await self._db.gate()
        with self._db.read() as conn:
            rows = conn.execute(_NEIGHBORS, params).fetchall()
        return [
            Neighbor(id=row["node"], strength=row["strength"], depth=row["depth"], seed=row["seed"])
            for row in rows
        ]

    async def links_of(self, namespace: str, ids: Sequence[str]) -> list[Link]:
        """When both ends are in `ids`, the link is reported once from each side."""
        ns = _check_namespace(namespace)
        if not ids:
            return []
        await self._db.gate()
        with self._db.read() as conn:
            rows = conn.execute(
                f"SELECT {_LINK_COLUMNS} FROM links WHERE namespace = ? AND source {IN_JSON} "
                "ORDER BY source, weight DESC, target",
                (ns, json_list(ids)),
            ).fetchall()
        return [_link(row) for row in rows]

    async def unlink(self, namespace: str, pairs: Sequence[tuple[str, str]]) -> int:
        """Returns how many links (not rows) were removed."""
        ns = _check_namespace(namespace)
        keys = list(dict.fromkeys(_pair(a, b) for a, b in pairs))
        if not keys:
            return 0
        rows = _both_ways((ns, a, b) for a, b in keys)
        await self._db.gate()
        with self._db.write() as conn:
            removed = conn.executemany(
                "DELETE FROM links WHERE namespace = ? AND source = ? AND target = ?", rows
            ).rowcount
        return removed // 2

    async def drop_nodes(self, namespace: str, ids: Sequence[str]) -> list[Link]:
        """The removed links are reported from the dropped node's side (once per side
        when both ends are dropped), ready to be kept with an archive record."""
        ns = _check_namespace(namespace)
        if not ids:
            return []
        wanted = json_list(ids)
        await self._db.gate()
        with self._db.write() as conn:
            rows = conn.execute(
                f"SELECT {_LINK_COLUMNS} FROM links WHERE namespace = ? AND source {IN_JSON} "
                "ORDER BY source, weight DESC, target",
                (ns, wanted),
            ).fetchall()
            conn.execute(
                f"DELETE FROM links WHERE namespace = ? AND source {IN_JSON}", (ns, wanted)
            )
            # The rows naming them as targets are the mirrors of those just read (every
            # link is two rows), deleted by key: there is no index by target.
            conn.executemany(
                "DELETE FROM links WHERE namespace = ? AND source = ? AND target = ?",
                [(ns, row["target"], row["source"]) for row in rows],
            )
        return [_link(row) for row in rows]

    async def count_links(self, namespace: str) -> int:
        ns = _check_namespace(namespace)
        await self._db.gate()
        with self._db.read() as conn:
            rows = int(
                conn.execute("SELECT count(*) FROM links WHERE namespace = ?", (ns,)).fetchone()[0]
            )
        return rows // 2

    async def clear(self, namespace: str | None = None) -> None:
        await self._db.gate()
        with self._db.write() as conn:
            if namespace is None:
                conn.execute("DELETE FROM links")
            else:
                conn.execute(
                    "DELETE FROM links WHERE namespace = ?", (_check_namespace(namespace),)
                )

    async def close(self) -> None:
        """Closes the file only when this graph opened it; on `store.database` the store
        owns it."""
        if self._owns_database:
            await self._db.close()
