"""`tiered-memory serve --transport http` on loopback, talked to by the SDK's own
streamable HTTP client (issue 21.3): a bearer token is checked on every request, and
each token reaches its own namespace only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tiered_memory import HashingEmbedder, TieredMemory
from tiered_memory.mcp_server import TOOLS

from .conftest import (
    STARTUP_SECONDS,
    TOKEN_A,
    TOKEN_B,
    HttpServer,
    data,
    error_text,
    start_http,
    stop,
)

pytestmark = [pytest.mark.http, pytest.mark.slow, pytest.mark.timeout(300)]

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def client(url: str, token: str | None) -> Client:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(STARTUP_SECONDS))
    return Client(streamable_http_client(url, http_client=http))


async def post(url: str, headers: dict[str, str]) -> httpx2.Response:
    async with httpx2.AsyncClient(timeout=30) as http:
        return await http.post(url, json=INITIALIZE, headers={**HEADERS, **headers})


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer wrong-token-0123456789abcdef",
        f"Bearer {TOKEN_A[:-1]}",  # a prefix of a real token
        f"Bearer {TOKEN_A}x",
        f"Basic {TOKEN_A}",
        TOKEN_A,
    ],
)
async def test_a_request_without_a_valid_bearer_token_is_refused(
    token_server: HttpServer, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"authorization": authorization}
    response = await post(token_server.url, headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert TOKEN_A not in response.text


async def test_every_path_needs_the_token(token_server: HttpServer) -> None:
    root = token_server.url.rsplit("/", 1)[0]
    async with httpx2.AsyncClient(timeout=30) as http:
        for path in ("/", "/mcp", "/health", "/.well-known/oauth-protected-resource"):
            assert (await http.get(root + path)).status_code == 401, path
    assert (await post(token_server.url, {"authorization": f"bearer {TOKEN_A}"})).is_success


async def test_a_token_lists_stores_and_recalls_inside_the_budget(
    token_server: HttpServer,
) -> None:
    async with client(token_server.url, TOKEN_A) as alice:
        assert {t.name for t in (await alice.list_tools()).tools} == set(TOOLS)
        for fact in ("Alice's flight leaves at 7am from gate B12", "Alice takes her tea black"):
            data(await alice.call_tool("store", {"content": fact, "importance": 0.8}))
        result = data(
            await alice.call_tool("recall", {"query": "when is the flight?", "budget_tokens": 15})
        )
        assert result["tokens"] <= 15
        assert "gate B12" in result["text"]
        assert data(await alice.call_tool("stats", {}))["namespace"] == "alice"


async def test_token_a_cannot_see_or_change_the_memories_of_token_b(
    token_server: HttpServer,
) -> None:
    async with client(token_server.url, TOKEN_B) as bob:
        secret = data(await bob.call_tool("store", {"content": "Bob's locker code is 5150"}))
        before = data(await bob.call_tool("search", {"query": "locker code"}))["hits"][0]

    async with client(token_server.url, TOKEN_A) as alice:
        found = data(await alice.call_tool("search", {"query": "Bob locker code", "deep": True}))
        assert all(hit["id"] != secret["id"] for hit in found["hits"])
        assert "5150" not in data(await alice.call_tool("recall", {"query": "locker"}))["text"]
        for tool, extra in [
            ("forget", {}),
            ("forget", {"hard": True}),
            ("pin", {}),
            ("unpin", {}),
            ("restore", {}),
            ("expand", {}),
        ]:
            message = error_text(await alice.call_tool(tool, {"id": secret["id"], **extra}))
            assert message.startswith(f"Error executing tool {tool}: not found:"), message
        refused = error_text(
            await alice.call_tool("forget", {"id": secret["id"], "namespace": "bob"})
        )
        assert "namespace is set by the server" in refused

    async with client(token_server.url, TOKEN_B) as bob:
        after = data(await bob.call_tool("search", {"query": "locker code"}))["hits"][0]
    assert after["id"] == secret["id"]
    assert (after["pinned"], after["forgotten"], after["tier"]) == (False, False, "hot")
    assert after["content"] == before["content"]

    store = TieredMemory.embedded(token_server.db, embedder=HashingEmbedder())
    try:
        memory = store.get(secret["id"], namespace="bob")
        assert memory is not None
        assert not memory.pinned
        assert not memory.do_not_inject
        assert store.get(secret["id"], namespace="alice") is None
    finally:
        store.close()


async def test_a_session_opened_with_one_token_is_not_usable_with_another(
    token_server: HttpServer,
) -> None:
    opened = await post(token_server.url, {"authorization": f"Bearer {TOKEN_B}"})
    assert opened.is_success
    session = opened.headers["mcp-session-id"]
    call: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "stats", "arguments": {}},
    }
    async with httpx2.AsyncClient(timeout=30) as http:
        reused = await http.post(
            token_server.url,
            json=call,
            headers={**HEADERS, "authorization": f"Bearer {TOKEN_A}", "mcp-session-id": session},
        )
    assert reused.status_code == 404  # as if B's session did not exist
    assert "bob" not in reused.text


async def test_one_namespace_on_loopback_needs_no_token(tmp_path: Path) -> None:
    server = start_http(tmp_path, tmp_path / "memory.db", "--namespace", "solo")
    try:
        async with client(server.url, None) as solo:
            stored = data(await solo.call_tool("store", {"content": "Solo likes jazz"}))
            assert data(await solo.call_tool("stats", {}))["namespace"] == "solo"
        assert server.url.startswith("http://127.0.0.1:")
    finally:
        assert stop(server.process) == 0, "".join(server.stderr)
    check = TieredMemory.embedded(tmp_path / "memory.db", embedder=HashingEmbedder())
    try:
        assert check.get(stored["id"], namespace="solo") is not None
    finally:
        check.close()
