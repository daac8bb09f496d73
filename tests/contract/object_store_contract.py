"""The ObjectStore contract, written once and run against every backend.

Subclass `ObjectStoreContract` in a `Test...` class and provide an async `objects`
fixture that yields a ready object store. Every test works in fresh uuid namespaces
(emptied afterwards), so the suite also runs against a shared bucket.

Conventions the suite pins down: `delete` of a missing key is not an error; `list`
returns the keys of one namespace, sorted; `head` reports the sha256 of the bytes.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import AsyncIterator

import pytest

from tiered_memory.errors import NotFoundError
from tiered_memory.ports import ObjectStore

HOSTILE_KEYS = [
    "../escape",
    "../../../../etc/passwd",
    "a/b/c",
    "/absolute",
    "..",
    ".",
    ".hidden",
    "%2F",
    "%",
    "Key",
    "key",
    "KEY",
    "with space",
    "back\\slash",
    "colon:star*?",
    "con",
    "nul",
    "tilde~name",
    "name.json",
    "\u65e5\u672c\u8a9e \U0001f600",
    "\u00e9",
    "e\u0301",
    "k" * 300,
    "k" * 299 + "K",
    "\u00fc" * 200,
]
HOSTILE_NAMESPACES = ["../up", "/", "a/b", "..", "NS", "ns", "\u540d\u524d", "n" * 300]


def unique_namespace(label: str = "objects") -> str:
    return f"contract-{label}-{uuid.uuid4().hex[:12]}"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ObjectStoreContract:
    """Behaviour every ObjectStore must have. Subclasses provide `objects`."""

    async def _empty(self, objects: ObjectStore, namespace: str) -> None:
        for key in await objects.list(namespace):
            await objects.delete(namespace, key)

    @pytest.fixture
    async def namespace(self, objects: ObjectStore) -> AsyncIterator[str]:
        ns = unique_namespace()
        yield ns
        await self._empty(objects, ns)

    @pytest.fixture
    async def other_namespace(self, objects: ObjectStore) -> AsyncIterator[str]:
        ns = unique_namespace("other")
        yield ns
        await self._empty(objects, ns)

    async def test_put_reports_size_and_sha256(self, objects: ObjectStore, namespace: str) -> None:
        data = b'{"schema_version": 1, "content": "Ava"}'
        info = await objects.put(namespace, "m-1", data)
        assert (info.key, info.size, info.checksum) == ("m-1", len(data), sha256(data))
        head = await objects.head(namespace, "m-1")
        assert head is not None
        assert (head.key, head.size, head.checksum) == ("m-1", len(data), sha256(data))

    @pytest.mark.parametrize(
        "data",
        [
            b"",
            bytes(range(256)) * 4,
            '{"text": "caf\u00e9 \u65e5\u672c \U0001f600"}'.encode(),
            b"\x00\r\n\x1a" * 1000,
            bytes(1_000_000),
        ],
        ids=["empty", "every-byte", "utf8-json", "control-bytes", "one-megabyte"],
    )
    async def test_round_trip_is_byte_for_byte(
        self, objects: ObjectStore, namespace: str, data: bytes
    ) -> None:
        await objects.put(namespace, "blob", data)
        assert await objects.get(namespace, "blob") == data
        head = await objects.head(namespace, "blob")
        assert head is not None
        assert (head.size, head.checksum) == (len(data), sha256(data))

    async def test_put_overwrites(self, objects: ObjectStore, namespace: str) -> None:
        await objects.put(namespace, "k", b"first version")
        info = await objects.put(namespace, "k", b"second")
        assert await objects.get(namespace, "k") == b"second"
        head = await objects.head(namespace, "k")
        assert head == info
        assert await objects.list(namespace) == ["k"]

    async def test_missing_objects(self, objects: ObjectStore, namespace: str) -> None:
        with pytest.raises(NotFoundError):
            await objects.get(namespace, "absent")
        assert await objects.head(namespace, "absent") is None
        assert await objects.list(namespace) == []
        await objects.delete(namespace, "absent")  # not an error

    async def test_delete_removes_the_object(self, objects: ObjectStore, namespace: str) -> None:
        await objects.put(namespace, "a", b"1")
        await objects.put(namespace, "b", b"2")
        await objects.delete(namespace, "a")
        with pytest.raises(NotFoundError):
            await objects.get(namespace, "a")
        assert await objects.head(namespace, "a") is None
        assert await objects.list(namespace) == ["b"]
        assert await objects.get(namespace, "b") == b"2"
        await objects.delete(namespace, "a")
        assert await objects.list(namespace) == ["b"]

    async def test_list_is_sorted(self, objects: ObjectStore, namespace: str) -> None:
        keys = ["m-3", "m-1", "m-2", "a"]
        for key in keys:
            await objects.put(namespace, key, key.encode())
        assert await objects.list(namespace) == sorted(keys)

    async def test_hostile_keys_never_collide_or_escape(
        self, objects: ObjectStore, namespace: str
    ) -> None:
        for i, key in enumerate(HOSTILE_KEYS):
            info = await objects.put(namespace, key, f"payload {i}".encode())
            assert info.key == key
        assert await objects.list(namespace) == sorted(HOSTILE_KEYS)
        for i, key in enumerate(HOSTILE_KEYS):
            assert await objects.get(namespace, key) == f"payload {i}".encode()
        refs = {objects.ref(namespace, key) for key in HOSTILE_KEYS}
        assert len(refs) == len(HOSTILE_KEYS)
        await objects.delete(namespace, "../escape")
        assert len(await objects.list(namespace)) == len(HOSTILE_KEYS) - 1
        assert (
            await objects.get(namespace, "key") == f"payload {HOSTILE_KEYS.index('key')}".encode()
        )

    async def test_namespaces_are_isolated(
        self, objects: ObjectStore, namespace: str, other_namespace: str
    ) -> None:
        await objects.put(namespace, "same", b"from a")
        await objects.put(other_namespace, "same", b"from b")
        await objects.put(namespace, "only-a", b"x")
        assert await objects.get(namespace, "same") == b"from a"
        assert await objects.get(other_namespace, "same") == b"from b"
        assert await objects.list(other_namespace) == ["same"]
        assert await objects.head(other_namespace, "only-a") is None
        with pytest.raises(NotFoundError):
            await objects.get(other_namespace, "only-a")
        await objects.delete(other_namespace, "same")
        assert await objects.get(namespace, "same") == b"from a"
        assert objects.ref(namespace, "same") != objects.ref(other_namespace, "same")

    @pytest.mark.parametrize("hostile", HOSTILE_NAMESPACES)
    async def test_hostile_namespaces_are_isolated(
        self, objects: ObjectStore, hostile: str
    ) -> None:
        prefix = unique_namespace("hostile")
        evil, near = f"{prefix}{hostile}", prefix
        try:
            await objects.put(evil, "k", b"evil")
            await objects.put(near, "k", b"near")
            assert await objects.get(evil, "k") == b"evil"
            assert await objects.get(near, "k") == b"near"
            assert await objects.list(evil) == ["k"]
            assert await objects.list(near) == ["k"]
        finally:
            await self._empty(objects, evil)
            await self._empty(objects, near)

    async def test_ref_is_a_stable_uri(self, objects: ObjectStore, namespace: str) -> None:
        ref = objects.ref(namespace, "m-1")
        assert ref == objects.ref(namespace, "m-1")
        assert "://" in ref
        assert ref != objects.ref(namespace, "m-2")
