"""S3ObjectStore against moto in server mode over loopback HTTP.

Failures the server cannot be asked for (503 SlowDown, 403) are injected with a
botocore `before-send` hook, which answers in place of the network for chosen
attempts; every other request really goes to the moto server.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from botocore.awsrequest import AWSResponse
from botocore.compat import HTTPHeaders
from botocore.exceptions import EndpointConnectionError

from tests.contract.object_store_contract import ObjectStoreContract
from tiered_memory.backends.s3.objects import S3ObjectStore
from tiered_memory.errors import (
    ArchiveIntegrityError,
    BackendUnavailableError,
    ConfigurationError,
    NotFoundError,
    ValidationError,
)
from tiered_memory.ports import ObjectStore

from .conftest import FAST, MotoServer, StoreFactory, unique_bucket

pytestmark = pytest.mark.s3

ORIGINAL = json.dumps(
    {
        "schema_version": 1,
        "original_id": "550e8400-e29b-41d4-a716-446655440000",
        "content": "Dr. Ava Chen presents the Q3 budget on March 14th.",
        "embedding": [0.0123, -0.0456],
        "archive_reason": "low_salience_aged_out",
    }
).encode()


class TestS3ObjectStoreContract(ObjectStoreContract):
    """The shared ObjectStore suite, each test on a fresh bucket of the moto server."""

    @pytest.fixture
    async def objects(self, make_store: StoreFactory) -> S3ObjectStore:
        return await make_store()


# -- layout, refs and round trips ---------------------------------------------------------


async def test_key_layout_and_ref(make_store: StoreFactory) -> None:
    store = await make_store()
    assert isinstance(store, ObjectStore)
    info = await store.put("user-42", "550e8400-e29b", ORIGINAL)

    raw = store.client()
    listed = raw.list_objects_v2(Bucket=store.bucket)
    assert [o["Key"] for o in listed["Contents"]] == ["tiered-memory/user-42/550e8400-e29b.json"]
    assert store.ref("user-42", "550e8400-e29b") == (
        f"s3://{store.bucket}/tiered-memory/user-42/550e8400-e29b.json"
    )
    head = raw.head_object(Bucket=store.bucket, Key="tiered-memory/user-42/550e8400-e29b.json")
    assert head["ContentType"] == "application/json"
    assert head["Metadata"] == {"sha256": hashlib.sha256(ORIGINAL).hexdigest()}
    assert info.key == "550e8400-e29b"


@pytest.mark.parametrize(
    ("prefix", "expected"),
    [
        ("archive/v1", "archive/v1/ns/id-1.json"),
        ("/archive//v1/", "archive/v1/ns/id-1.json"),
        ("", "ns/id-1.json"),
    ],
)
async def test_prefix_is_normalised(make_store: StoreFactory, prefix: str, expected: str) -> None:
    store = await make_store(prefix=prefix)
    await store.put("ns", "id-1", b"{}")
    keys = [o["Key"] for o in store.client().list_objects_v2(Bucket=store.bucket)["Contents"]]
    assert keys == [expected]
    assert await store.list("ns") == ["id-1"]


def test_prefix_may_not_climb() -> None:
    with pytest.raises(ConfigurationError):
        S3ObjectStore("bucket-name", prefix="archive/../other")


async def test_round_trips_byte_for_byte(make_store: StoreFactory) -> None:
    store = await make_store()
    bodies = {
        "json": ORIGINAL,
        "binary": bytes(range(256)) * 4,
        "empty": b"",
        "large": b"x" * (2 * 1024 * 1024 + 3),
    }
    for key, body in bodies.items():
        info = await store.put("ns", key, body)
        assert (info.size, info.checksum) == (len(body), hashlib.sha256(body).hexdigest())
        assert await store.get("ns", key) == body
        assert await store.head("ns", key) == info


async def test_put_overwrites(make_store: StoreFactory) -> None:
    store = await make_store()
    await store.put("ns", "k", b"first")
    second = await store.put("ns", "k", b"second version")
    assert await store.get("ns", "k") == b"second version"
    assert await store.head("ns", "k") == second


async def test_missing_objects(make_store: StoreFactory) -> None:
    store = await make_store()
    assert await store.head("ns", "nope") is None
    with pytest.raises(NotFoundError, match="nope"):
        await store.get("ns", "nope")
    await store.delete("ns", "nope")  # absent is fine: S3 semantics
    assert await store.list("ns") == []


async def test_delete_and_list(make_store: StoreFactory) -> None:
    store = await make_store()
    for key in ("c", "a", "b"):
        await store.put("ns", key, b"{}")
    await store.put("other", "z", b"{}")
    assert await store.list("ns") == ["a", "b", "c"]
    await store.delete("ns", "b")
    assert await store.list("ns") == ["a", "c"]
    assert await store.head("ns", "b") is None
    assert await store.list("other") == ["z"]


async def test_list_pages_through_every_object(make_store: StoreFactory) -> None:
    store = await make_store(page_size=2)
    keys = [f"m-{i:02d}" for i in range(7)]
    await asyncio.gather(*(store.put("ns", k, b"{}") for k in keys))
    calls: list[str] = []
    on(store, "before-call.s3.ListObjectsV2", lambda **kwargs: calls.append("list"))
    assert await store.list("ns") == keys
    assert len(calls) == 4  # 2 + 2 + 2 + 1


async def test_concurrent_puts(make_store: StoreFactory) -> None:
    store = await make_store()
    keys = [f"k{i}" for i in range(40)]
    infos = await asyncio.gather(*(store.put("ns", k, k.encode()) for k in keys))
    assert [i.key for i in infos] == keys
    assert await store.list("ns") == sorted(keys)


# -- checksums ---------------------------------------------------------------------------


async def test_native_sha256_checksum_is_stored(make_store: StoreFactory) -> None:
    store = await make_store()
    await store.put("ns", "k", ORIGINAL)
    head = store.client().head_object(
        Bucket=store.bucket, Key=store.object_key("ns", "k"), ChecksumMode="ENABLED"
    )
    assert head["ChecksumSHA256"] == base64.b64encode(hashlib.sha256(ORIGINAL).digest()).decode()


async def test_metadata_checksum_alone_when_native_checksums_are_off(
    make_store: StoreFactory,
) -> None:
    store = await make_store(native_checksums=False)
    info = await store.put("ns", "k", ORIGINAL)
    head = store.client().head_object(
        Bucket=store.bucket, Key=store.object_key("ns", "k"), ChecksumMode="ENABLED"
    )
    assert head.get("ChecksumSHA256") is None
    assert (await store.head("ns", "k")) == info
    assert await store.get("ns", "k") == ORIGINAL


async def test_a_body_changed_behind_our_back_is_refused(make_store: StoreFactory) -> None:
    store = await make_store()
    info = await store.put("ns", "k", ORIGINAL)
    tampered = ORIGINAL.replace(b"March 14th", b"March 15th")
    store.client().put_object(  # same metadata, different bytes, as a careless tool might
        Bucket=store.bucket,
        Key=store.object_key("ns", "k"),
        Body=tampered,
        Metadata={"sha256": info.checksum},
    )
    with pytest.raises(ArchiveIntegrityError, match="no longer matches"):
        await store.get("ns", "k")
    head = await store.head("ns", "k")
    assert head is not None
    assert head.size == len(tampered)


async def test_an_object_without_checksum_reports_an_empty_one(make_store: StoreFactory) -> None:
    store = await make_store()
    store.client().put_object(Bucket=store.bucket, Key=store.object_key("ns", "k"), Body=b"{}")
    head = await store.head("ns", "k")
    assert head is not None
    assert head.checksum == ""  # never equal to a real sha256: verification fails closed
    assert await store.get("ns", "k") == b"{}"


# -- hostile names -----------------------------------------------------------------------

HOSTILE = [
    "..",
    ".",
    "../../etc/passwd",
    "a/b",
    "a%2Fb",
    "%",
    "%2E%2E",
    "ns/../other",
    " spaced out ",
    "ünïcödé",
    "emoji 🎉",
    "tab\there",
    "line\nbreak",
    "nul\x00byte",
    "?query#frag&x=1",
    "back\\slash",
    "*",
    "a.json",
    "~tilde",
]


@pytest.mark.parametrize("name", HOSTILE)
async def test_hostile_names_stay_inside_their_namespace(
    make_store: StoreFactory, name: str
) -> None:
    store = await make_store()
    await store.put(name, name, name.encode())
    await store.put("victim", "doc", b"victim")
    assert await store.get(name, name) == name.encode()
    assert await store.list(name) == [name]
    assert await store.list("victim") == ["doc"]
    object_key = store.object_key(name, name)
    assert object_key.startswith("tiered-memory/")
    assert object_key.count("/") == 2
    assert all(part not in (".", "..", "") for part in object_key.split("/"))
    await store.delete(name, name)
    assert await store.get("victim", "doc") == b"victim"


async def test_names_that_would_collide_when_joined_do_not(make_store: StoreFactory) -> None:
    store = await make_store()
    pairs = [("a/b", "c"), ("a", "b/c"), ("a%2Fb", "c"), ("a", "b%2Fc"), ("a.", "b"), ("a", ".b")]
    for i, (ns, key) in enumerate(pairs):
        await store.put(ns, key, str(i).encode())
    assert len({store.object_key(ns, key) for ns, key in pairs}) == len(pairs)
    for i, (ns, key) in enumerate(pairs):
        assert await store.get(ns, key) == str(i).encode()
    assert await store.list("a") == sorted(["b/c", "b%2Fc", ".b"])


@pytest.mark.parametrize(
    ("namespace", "key"),
    [("", "k"), ("ns", ""), ("ns", "lone \ud800 surrogate"), ("ns", "é" * 600)],
)
async def test_unusable_names_are_rejected_before_any_request(
    make_store: StoreFactory, namespace: str, key: str
) -> None:
    store = await make_store()
    with pytest.raises(ValidationError):
        await store.put(namespace, key, b"{}")
    assert "Contents" not in store.client().list_objects_v2(Bucket=store.bucket)


# -- addressing -----------------------------------------------------------------------------


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self._data


def _answer(url: str, status: int, code: str = "") -> AWSResponse:
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{code}</Code>'
        f"<Message>injected</Message></Error>"
    ).encode()
    headers = HTTPHeaders()
    headers["Content-Type"] = "application/xml"
    return AWSResponse(url, status, headers, _Body(body))


def on(store: S3ObjectStore, event: str, hook: Callable[..., Any]) -> None:
    """Register a botocore event hook (the stubs only admit hooks returning None)."""
    events: Any = store.client().meta.events
    events.register(event, hook)


@pytest.mark.parametrize(
    ("endpoint", "path_style", "expected"),
    [
        (
            "https://s3.storage.test",
            True,
            "https://s3.storage.test/tm-bucket/tiered-memory/ns/k.json",
        ),
        (
            "https://s3.storage.test",
            False,
            "https://tm-bucket.s3.storage.test/tiered-memory/ns/k.json",
        ),
        (
            "https://s3.storage.test",
            None,
            "https://s3.storage.test/tm-bucket/tiered-memory/ns/k.json",
        ),
        (None, None, "https://tm-bucket.s3.amazonaws.com/tiered-memory/ns/k.json"),
        (None, True, "https://s3.amazonaws.com/tm-bucket/tiered-memory/ns/k.json"),
    ],
)
async def test_path_style_addressing(
    endpoint: str | None, path_style: bool | None, expected: str
) -> None:
    """Where the bucket goes in the URL. Answered by the hook before any socket opens."""
    store = S3ObjectStore(
        "tm-bucket",
        endpoint_url=endpoint,
        region_name="us-east-1",
        path_style=path_style,
    )
    urls: list[str] = []

    def intercept(request: Any, **_: Any) -> AWSResponse:
        urls.append(request.url)
        return _answer(request.url, 404, "NoSuchKey")

    on(store, "before-send.s3", intercept)
    with pytest.raises(NotFoundError):
        await store.get("ns", "k")
    assert urls == [expected]
    await store.close()


async def test_path_style_against_the_server(make_store: StoreFactory) -> None:
    store = await make_store(path_style=True)
    urls: list[str] = []
    on(store, "before-send.s3", lambda request, **_: urls.append(request.url))
    await store.put("ns", "k", b"{}")
    assert urls[-1].endswith(f"/{store.bucket}/tiered-memory/ns/k.json")


# -- failures ------------------------------------------------------------------------------


async def test_throttling_is_retried_by_botocore(make_store: StoreFactory) -> None:
    store = await make_store(max_attempts=3)
    attempts: list[str] = []

    def slow_down_twice(request: Any, **_: Any) -> AWSResponse | None:
        attempts.append(request.url)
        return _answer(request.url, 503, "SlowDown") if len(attempts) <= 2 else None

    on(store, "before-send.s3.PutObject", slow_down_twice)
    info = await store.put("ns", "k", ORIGINAL)
    assert len(attempts) == 3
    assert await store.head("ns", "k") == info


async def test_throttling_past_every_attempt_is_backend_unavailable(
    make_store: StoreFactory,
) -> None:
    store = await make_store(max_attempts=2)
    attempts: list[str] = []

    def always_slow_down(request: Any, **_: Any) -> AWSResponse:
        attempts.append(request.url)
        return _answer(request.url, 503, "SlowDown")

    on(store, "before-send.s3.PutObject", always_slow_down)
    with pytest.raises(BackendUnavailableError, match="SlowDown"):
        await store.put("ns", "k", ORIGINAL)
    assert len(attempts) == 2


async def test_access_denied_is_a_configuration_error(make_store: StoreFactory) -> None:
    store = await make_store()
    on(
        store,
        "before-send.s3.GetObject",
        lambda request, **_: _answer(request.url, 403, "AccessDenied"),
    )
    with pytest.raises(ConfigurationError, match="credentials"):
        await store.get("ns", "k")


async def test_missing_bucket_says_how_to_fix_it(make_store: StoreFactory) -> None:
    store = await make_store(create=False)
    with pytest.raises(ConfigurationError, match="create_bucket_if_missing"):
        await store.put("ns", "k", b"{}")
    with pytest.raises(ConfigurationError, match="does not exist"):
        await store.list("ns")
    assert await store.create_bucket_if_missing() is True
    assert await store.create_bucket_if_missing() is False
    await store.put("ns", "k", b"{}")
    assert await store.list("ns") == ["k"]


async def test_bucket_in_another_region(make_store: StoreFactory) -> None:
    store = await make_store(region_name="eu-west-1")
    await store.put("ns", "k", b"{}")
    location = store.client().get_bucket_location(Bucket=store.bucket)
    assert location["LocationConstraint"] == "eu-west-1"


async def test_server_stopped_is_backend_unavailable_quickly(outage_server: MotoServer) -> None:
    store = S3ObjectStore(
        unique_bucket(), endpoint_url=outage_server.endpoint, **{**FAST, "max_attempts": 2}
    )
    await store.create_bucket_if_missing()
    await store.put("ns", "before", ORIGINAL)
    assert await store.get("ns", "before") == ORIGINAL

    outage_server.stop()
    started = time.monotonic()
    for call in (
        store.get("ns", "before"),
        store.head("ns", "before"),
        store.put("ns", "after", ORIGINAL),
        store.list("ns"),
        store.delete("ns", "before"),
    ):
        with pytest.raises(BackendUnavailableError, match="cannot reach") as caught:
            await call
        assert isinstance(caught.value.__cause__, EndpointConnectionError)
    assert time.monotonic() - started < 10  # five calls, two attempts each
    await store.close()


# -- construction -----------------------------------------------------------------------------


async def test_construction_does_no_io() -> None:
    store = S3ObjectStore("tm-bucket", endpoint_url="http://127.0.0.1:9", path_style=True)
    assert store._client is None  # built on first use, not in __init__
    await store.close()  # closing a store never used is fine


def test_importing_the_module_does_not_import_boto3() -> None:
    code = (
        "import sys, tiered_memory.backends.s3.objects as m; m.S3ObjectStore('tm-bucket'); "
        "print('boto3' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert result.stdout.strip() == "False"


async def test_a_client_passed_in_is_used_and_left_open(make_store: StoreFactory) -> None:
    owner = await make_store()
    client = owner.client()
    store = S3ObjectStore(owner.bucket, client=client, prefix="shared")
    await store.put("ns", "k", b"{}")
    await store.close()
    assert client.list_objects_v2(Bucket=owner.bucket)["KeyCount"] == 1  # still usable


def test_client_and_client_settings_are_exclusive() -> None:
    with pytest.raises(ConfigurationError):
        S3ObjectStore("tm-bucket", client=object(), endpoint_url="http://x")  # type: ignore[arg-type]


@pytest.mark.parametrize("kwargs", [{"max_attempts": 0}, {"page_size": 0}, {"page_size": 1001}])
def test_nonsense_settings_are_rejected(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ConfigurationError):
        S3ObjectStore("tm-bucket", **kwargs)


@pytest.mark.parametrize("bucket", ["", "a/b"])
def test_bucket_must_be_a_name(bucket: str) -> None:
    with pytest.raises(ConfigurationError):
        S3ObjectStore(bucket)
