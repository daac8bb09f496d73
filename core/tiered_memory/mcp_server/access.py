"""Who may talk to the MCP server, and which namespace each request reaches.

A server is scoped in one of two ways, chosen by the operator at start, never by a
client:

- one namespace for every connection (`--namespace`): stdio, or HTTP on loopback;
- a bearer-token file mapping each token to its namespace (`--tokens`): HTTP, where
  each request's token decides its namespace.

No tool takes a namespace, so the only way to reach a namespace is to hold its token.
Binding HTTP to anything but loopback without tokens is refused at start.

Tokens are compared in constant time against every configured token (no early exit),
so the time a refusal takes says nothing about how close a guess was.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import sys
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken

from tiered_memory.errors import ConfigurationError, TieredMemoryError
from tiered_memory.namespaces import check_namespace
from tiered_memory.policy import Limits

# The ASGI scope key the bearer gate sets to the namespace of the request's token.
NAMESPACE_KEY = "tiered_memory.namespace"
# Short tokens can be guessed; 16 characters of `secrets.token_urlsafe` are 96 bits.
MIN_TOKEN_CHARS = 16
TOKEN_HINT = "make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


class AccessDeniedError(TieredMemoryError):
    """A request carried no namespace the operator granted it."""


@dataclass(frozen=True)
class TokenMap:
    """Bearer tokens and the namespace each one reaches (the operator's mapping)."""

    entries: tuple[tuple[bytes, str], ...]

    def namespace_for(self, token: bytes) -> str | None:
        """The namespace of `token`, or None; every entry is compared, match or not."""
        found: str | None = None
        for known, namespace in self.entries:
            if hmac.compare_digest(known, token):
                found = namespace
        return found

    @staticmethod
    def client_id(token: bytes) -> str:
        """Names a token's holder (in logs, and to bind an HTTP session to the token
        that opened it) without revealing the token."""
        return "token-" + hashlib.sha256(token).hexdigest()[:16]

    @property
    def namespaces(self) -> list[str]:
        return sorted({ns for _, ns in self.entries})


def load_tokens(path: Path, limits: Limits | None = None) -> TokenMap:
    """Read a token file: TOML with a `[tokens]` table, or JSON with a "tokens" object,
    mapping each bearer token to one namespace. Every problem is a ConfigurationError
    naming the fix; a token's text never appears in a message."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigurationError(f"cannot read the token file {str(path)!r}: {e}") from e
    data = _parse(path, text)
    table = data.get("tokens") if isinstance(data, Mapping) else None
    if not isinstance(table, Mapping) or not table:
        raise ConfigurationError(
            f"token file {str(path)!r} has no tokens; write a [tokens] table of "
            '"<token>" = "<namespace>" lines'
        )
    entries: list[tuple[bytes, str]] = []
    for number, (token, namespace) in enumerate(table.items(), start=1):
        where = f"token file {str(path)!r}, entry {number}"
        if not isinstance(token, str) or len(token) < MIN_TOKEN_CHARS:
            raise ConfigurationError(
                f"{where}: a token must be at least {MIN_TOKEN_CHARS} characters; {TOKEN_HINT}"
            )
        if not token.isascii() or not token.isprintable() or " " in token:
            raise ConfigurationError(
                f"{where}: a token must be printable ASCII without spaces; {TOKEN_HINT}"
            )
        try:
            ns = str(check_namespace(namespace, limits or Limits()))
        except TieredMemoryError as e:
            raise ConfigurationError(f"{where}: {e}") from e
        entries.append((token.encode("ascii"), ns))
    return TokenMap(tuple(entries))


def _parse(path: Path, text: str) -> Any:
    if path.suffix.lower() == ".json":
        try:
            return json.loads(text)
        except ValueError as e:
            raise ConfigurationError(f"token file {str(path)!r} is not valid JSON: {e}") from e
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10: tomli is a core dependency there
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigurationError(f"token file {str(path)!r} is not valid TOML: {e}") from e


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address; any other name may resolve beyond this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_binding(host: str, tokens: TokenMap | None) -> None:
    """Refuse to serve beyond this machine without bearer tokens."""
    if tokens is None and not is_loopback(host):
        raise ConfigurationError(
            f"binding to {host!r} exposes the memory beyond this machine; pass --tokens FILE "
            "(bearer tokens, each mapped to its namespace), or bind to 127.0.0.1"
        )


class Scoping:
    """The namespace a tool call reaches: fixed at start, or the one the bearer gate
    found for the request's token (the gate refuses a request without one)."""

    def __init__(self, namespace: str | None = None, tokens: TokenMap | None = None) -> None:
        if (namespace is None) == (tokens is None):
            raise ConfigurationError("scope the server by --namespace or by --tokens, not both")
        self.fixed = namespace
        self.tokens = tokens

    def namespace(self, request: object | None) -> str:
        if self.fixed is not None:
            return self.fixed
        scope = getattr(request, "scope", None)
        found = scope.get(NAMESPACE_KEY) if isinstance(scope, Mapping) else None
        if not isinstance(found, str):
            raise AccessDeniedError("this request carries no bearer token granting a namespace")
        return found


class BearerGate:
    """ASGI middleware in front of the whole HTTP app: every request must carry
    `Authorization: Bearer <token>` for a configured token, else 401 and nothing else
    runs. The token's namespace goes into the scope for the tools to read."""

    def __init__(self, app: ASGIApp, tokens: TokenMap) -> None:
        self.app = app
        self.tokens = tokens

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope.get("type") == "lifespan":
            await self.app(scope, receive, send)
            return
        token = _bearer(scope)
        namespace = self.tokens.namespace_for(token)
        if namespace is None:
            if scope.get("type") == "http":
                await _unauthorized(send)
            else:  # a websocket (the app serves none): refused before it is accepted
                await send({"type": "websocket.close", "code": 1008})
            return
        scope[NAMESPACE_KEY] = namespace
        # The SDK binds a session to the principal that opened it: another token
        # presenting the session's id is answered as if the session did not exist.
        client_id = self.tokens.client_id(token)
        scope["user"] = AuthenticatedUser(
            AccessToken(token=client_id, client_id=client_id, scopes=[])
        )
        await self.app(scope, receive, send)


def _bearer(scope: Scope) -> bytes:
    values = [v for k, v in scope.get("headers", ()) if k.lower() == b"authorization"]
    if len(values) != 1:  # none, or ambiguous
        return b""
    scheme, _, token = bytes(values[0]).strip().partition(b" ")
    return token.strip() if scheme.lower() == b"bearer" else b""


async def _unauthorized(send: Send) -> None:
    body = json.dumps(
        {"error": "invalid_token", "error_description": "a valid bearer token is required"}
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer error="invalid_token"'),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


__all__ = [
    "NAMESPACE_KEY",
    "AccessDeniedError",
    "BearerGate",
    "Scoping",
    "TokenMap",
    "check_binding",
    "is_loopback",
    "load_tokens",
]
