"""Who may talk to the server and which namespace a request reaches, without a server:
the token file, the loopback rule, the bearer gate (as a bare ASGI app) and the
command line's refusals before anything is opened."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from typer.testing import CliRunner

from tiered_memory.cli import app
from tiered_memory.errors import ConfigurationError, NamespaceError
from tiered_memory.mcp_server import BearerGate, Scoping, TokenMap, check_binding, load_tokens
from tiered_memory.mcp_server.access import NAMESPACE_KEY, AccessDeniedError, is_loopback
from tiered_memory.mcp_server.run import ServeOptions
from tiered_memory.policy import Limits

from .conftest import TOKEN_A, TOKEN_B, write_tokens

# -- the token file ----------------------------------------------------------------------


def test_a_toml_token_file_maps_tokens_to_namespaces(tmp_path: Path) -> None:
    path = tmp_path / "tokens.toml"
    path.write_text(f'[tokens]\n"{TOKEN_A}" = "alice"\n"{TOKEN_B}" = "bob"\n', encoding="utf-8")
    tokens = load_tokens(path)
    assert tokens.namespace_for(TOKEN_A.encode()) == "alice"
    assert tokens.namespace_for(TOKEN_B.encode()) == "bob"
    assert tokens.namespaces == ["alice", "bob"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{}", "has no tokens"),
        ('{"tokens": []}', "has no tokens"),
        ('{"tokens": {"short": "alice"}}', "at least 16 characters"),
        ('{"tokens": {"has a space in it 0123": "alice"}}', "printable ASCII"),
        ('{"tokens": {"caf\\u00e9-0123456789abcdef": "alice"}}', "printable ASCII"),
        (f'{{"tokens": {{"{TOKEN_A}": "  "}}}}', "namespace is empty"),
        (f'{{"tokens": {{"{TOKEN_A}": 42}}}}', "namespace must be a string"),
        (f'{{"tokens": {{"{TOKEN_A}": "{"n" * 300}"}}}}', "the limit is 256"),
        ("{not json", "not valid JSON"),
    ],
)
def test_a_bad_token_file_is_refused_without_echoing_tokens(
    tmp_path: Path, content: str, message: str
) -> None:
    path = tmp_path / "tokens.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigurationError, match=message) as refused:
        load_tokens(path, Limits())
    assert TOKEN_A not in str(refused.value)


def test_a_missing_or_bad_toml_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="cannot read the token file"):
        load_tokens(tmp_path / "nope.toml")
    bad = tmp_path / "tokens.toml"
    bad.write_text("[tokens\n", encoding="utf-8")
    with pytest.raises(ConfigurationError, match="not valid TOML"):
        load_tokens(bad)


def test_only_the_whole_token_matches() -> None:
    tokens = TokenMap(((TOKEN_A.encode(), "alice"),))
    for guess in (b"", TOKEN_A[:-1].encode(), (TOKEN_A + "x").encode(), TOKEN_A.upper().encode()):
        assert tokens.namespace_for(guess) is None
    assert TOKEN_A not in TokenMap.client_id(TOKEN_A.encode())


# -- where the server may listen ---------------------------------------------------------


@pytest.mark.parametrize("host", ["127.0.0.1", "127.8.9.1", "localhost", "::1", "[::1]"])
def test_loopback_needs_no_token(host: str) -> None:
    assert is_loopback(host)
    check_binding(host, None)


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.168.1.10", "example.com", "localhost.evil"])
def test_anything_else_needs_tokens(host: str) -> None:
    assert not is_loopback(host)
    with pytest.raises(ConfigurationError, match="--tokens"):
        check_binding(host, None)
    check_binding(host, TokenMap(((TOKEN_A.encode(), "alice"),)))


def test_serve_options_refuse_mixed_scoping() -> None:
    tokens = TokenMap(((TOKEN_A.encode(), "alice"),))
    limits = Limits()
    with pytest.raises(ConfigurationError, match="drop --namespace"):
        ServeOptions(transport="http", namespace="x", tokens=tokens).check(limits)
    with pytest.raises(ConfigurationError, match="applies to --transport http"):
        ServeOptions(transport="stdio", tokens=tokens).check(limits)
    with pytest.raises(ConfigurationError, match="is not a port"):
        ServeOptions(transport="http", port=70_000).check(limits)
    with pytest.raises(NamespaceError, match="namespace is empty"):
        ServeOptions(namespace=" ").check(limits)
    assert ServeOptions(namespace="alice").check(limits).namespace(None) == "alice"


def test_a_request_without_a_granted_namespace_reaches_none() -> None:
    scoping = Scoping(tokens=TokenMap(((TOKEN_A.encode(), "alice"),)))
    with pytest.raises(AccessDeniedError):
        scoping.namespace(None)

    assert scoping.namespace(SimpleNamespace(scope={NAMESPACE_KEY: "alice"})) == "alice"
    with pytest.raises(ConfigurationError):
        Scoping()


# -- the bearer gate ---------------------------------------------------------------------


async def call_gate(headers: list[tuple[bytes, bytes]]) -> tuple[int, dict[str, Any] | None]:
    reached: dict[str, Any] = {}

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        reached.update(scope)
        await send({"type": "http.response.start", "status": 200, "headers": []})

    sent: list[dict[str, Any]] = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def receive() -> Any:
        return {"type": "http.request", "body": b""}

    gate = BearerGate(inner, TokenMap(((TOKEN_A.encode(), "alice"), (TOKEN_B.encode(), "bob"))))
    await gate({"type": "http", "headers": headers}, receive, send)
    return sent[0]["status"], reached or None


@pytest.mark.parametrize(
    "headers",
    [
        [],
        [(b"authorization", b"Bearer nope-0123456789abcdef")],
        [(b"authorization", b"Token " + TOKEN_A.encode())],
        [(b"authorization", TOKEN_A.encode())],
        [(b"x-authorization", b"Bearer " + TOKEN_A.encode())],
        # two Authorization headers are ambiguous, even if one is right
        [(b"authorization", b"Bearer " + TOKEN_A.encode()), (b"authorization", b"Bearer x")],
    ],
)
async def test_the_gate_refuses_before_the_app_runs(headers: list[tuple[bytes, bytes]]) -> None:
    status, reached = await call_gate(headers)
    assert status == 401
    assert reached is None


async def test_the_gate_passes_the_tokens_namespace() -> None:
    status, reached = await call_gate([(b"Authorization", b"Bearer " + TOKEN_B.encode())])
    assert status == 200
    assert reached is not None
    assert reached[NAMESPACE_KEY] == "bob"
    assert reached["user"].username == TokenMap.client_id(TOKEN_B.encode())


async def test_a_forged_namespace_in_the_scope_is_overwritten() -> None:
    reached: dict[str, Any] = {}

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        reached.update(scope)

    async def nothing(*_: Any) -> Any:
        return None

    gate = BearerGate(inner, TokenMap(((TOKEN_A.encode(), "alice"),)))
    headers = [(b"authorization", b"Bearer " + TOKEN_A.encode())]
    await gate({"type": "http", "headers": headers, NAMESPACE_KEY: "bob"}, nothing, nothing)
    assert reached[NAMESPACE_KEY] == "alice"


# -- the command line refuses before opening anything --------------------------------------


@pytest.fixture
def runner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg-data"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg-config"))
    return CliRunner()


def test_serve_refuses_a_public_address_without_tokens(runner: CliRunner, tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    argv = ["serve", "--transport", "http", "--host", "0.0.0.0", "--db", str(db)]
    result = runner.invoke(app, argv)
    assert result.exit_code == 1
    assert "--tokens" in result.stderr
    assert not db.exists()  # nothing was opened


def test_serve_refuses_a_bad_token_file(runner: CliRunner, tmp_path: Path) -> None:
    tokens = write_tokens(tmp_path / "tokens.json", {"short": "alice"})
    db = tmp_path / "memory.db"
    argv = ["serve", "--transport", "http", "--tokens", str(tokens), "--db", str(db)]
    result = runner.invoke(app, argv)
    assert result.exit_code == 1
    assert "at least 16 characters" in result.stderr
    assert not db.exists()


def test_serve_refuses_tokens_with_a_namespace(runner: CliRunner, tmp_path: Path) -> None:
    tokens = write_tokens(tmp_path / "tokens.json", {TOKEN_A: "alice"})
    argv = ["serve", "--transport", "http", "--tokens", str(tokens), "-n", "bob"]
    result = runner.invoke(app, [*argv, "--db", str(tmp_path / "memory.db")])
    assert result.exit_code == 1
    assert "drop --namespace" in result.stderr
    assert json.loads((tmp_path / "tokens.json").read_text())  # untouched
