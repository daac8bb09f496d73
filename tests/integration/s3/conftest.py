"""moto in server mode on loopback: a real S3 HTTP endpoint for the object-store tests.

One server serves the whole session (every test gets its own bucket); tests that
need to kill the endpoint mid-way get a server of their own. Dummy credentials are
set per test through monkeypatch, and the AWS config files and instance metadata are
switched off, so nothing here can ever reach real AWS.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from moto.server import ThreadedMotoServer

from tiered_memory.backends.s3.objects import S3ObjectStore


@dataclass
class MotoServer:
    """A running moto server; `stop()` is how a test simulates an outage."""

    server: ThreadedMotoServer
    endpoint: str
    running: bool = True

    def stop(self) -> None:
        if self.running:
            self.running = False
            self.server.stop()


def _start() -> MotoServer:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return MotoServer(server, f"http://{host}:{port}")


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    server = _start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def s3_endpoint(moto_server: MotoServer) -> str:
    return moto_server.endpoint


@pytest.fixture
def outage_server() -> Iterator[MotoServer]:
    """A moto server of this test's own, which the test may stop."""
    server = _start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(autouse=True)
def _dummy_aws(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in (
        "AWS_PROFILE",
        "AWS_DEFAULT_PROFILE",
        "AWS_SESSION_TOKEN",
        "AWS_SECURITY_TOKEN",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_S3",
        "AWS_ROLE_ARN",
        "AWS_WEB_IDENTITY_TOKEN_FILE",
        "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
        "AWS_CONTAINER_CREDENTIALS_FULL_URI",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


def unique_bucket() -> str:
    return f"tm-{uuid.uuid4().hex[:24]}"


# Short timeouts and few attempts: a dead endpoint must fail the test fast, not hang it.
FAST: dict[str, Any] = {
    "region_name": "us-east-1",
    "path_style": True,
    "max_attempts": 3,
    "connect_timeout": 1.0,
    "read_timeout": 5.0,
}


@dataclass
class StoreFactory:
    endpoint: str
    made: list[S3ObjectStore] = field(default_factory=list)

    async def __call__(
        self, *, bucket: str | None = None, create: bool = True, **kwargs: Any
    ) -> S3ObjectStore:
        options = {**FAST, "endpoint_url": self.endpoint, **kwargs}
        store = S3ObjectStore(bucket or unique_bucket(), **options)
        self.made.append(store)
        if create:
            await store.create_bucket_if_missing()
        return store


@pytest.fixture
async def make_store(s3_endpoint: str) -> AsyncIterator[StoreFactory]:
    factory = StoreFactory(s3_endpoint)
    try:
        yield factory
    finally:
        for store in factory.made:
            await store.close()
