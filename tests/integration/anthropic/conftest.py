"""A loopback stand-in for the Anthropic Messages API, scripted per test.

It speaks just enough of `POST /v1/messages` for the SDK: JSON message bodies,
error bodies with status codes (429 with retry-after, 529 overloaded, 500), slow
replies for timeouts, and deliberately broken bodies. Every request is recorded so
tests can assert what the summariser sent and when.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest


@dataclass(frozen=True)
class Reply:
    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = (("content-type", "application/json"),)
    delay: float = 0.0


def message(
    text: str = "Ava Chen presents the budget on March 14th.",
    *,
    input_tokens: int = 120,
    output_tokens: int = 30,
    stop_reason: str = "end_turn",
    model: str = "claude-haiku-4-5-20251001",
) -> Reply:
    body = {
        "id": "msg_stub",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }
    return Reply(body=json.dumps(body).encode())


def error(status: int, kind: str, *, retry_after: str | None = None, delay: float = 0.0) -> Reply:
    body = {"type": "error", "error": {"type": kind, "message": f"stub {kind}"}}
    headers: tuple[tuple[str, str], ...] = (("content-type", "application/json"),)
    if retry_after is not None:
        headers += (("retry-after", retry_after),)
    return Reply(status=status, body=json.dumps(body).encode(), headers=headers, delay=delay)


def raw(body: bytes, content_type: str = "application/json") -> Reply:
    return Reply(body=body, headers=(("content-type", content_type),))


@dataclass(frozen=True)
class Received:
    at: float  # time.monotonic() on arrival
    path: str
    headers: dict[str, str]
    body: dict[str, Any]


@dataclass
class MessagesStub:
    url: str = ""
    script: deque[Reply] = field(default_factory=deque)
    received: list[Received] = field(default_factory=list)
    default: Reply = field(default_factory=message)

    def then(self, *replies: Reply) -> MessagesStub:
        self.script.extend(replies)
        return self

    def next_reply(self) -> Reply:
        return self.script.popleft() if self.script else self.default


def _handler(stub: MessagesStub) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length", "0"))
            payload = self.rfile.read(length)
            with lock:
                stub.received.append(
                    Received(
                        at=time.monotonic(),
                        path=self.path,
                        headers={k.lower(): v for k, v in self.headers.items()},
                        body=json.loads(payload or b"{}"),
                    )
                )
                reply = (
                    stub.next_reply()
                    if self.path == "/v1/messages"
                    else error(404, "not_found_error")
                )
            if reply.delay:
                time.sleep(reply.delay)
            try:
                self.send_response(reply.status)
                for name, value in reply.headers:
                    self.send_header(name, value)
                self.send_header("content-length", str(len(reply.body)))
                self.end_headers()
                self.wfile.write(reply.body)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client timed out and hung up first: that is the test

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler


@pytest.fixture
def stub() -> Iterator[MessagesStub]:
    messages = MessagesStub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(messages))
    server.daemon_threads = True
    host, port = server.server_address[:2]
    messages.url = f"http://{host!s}:{port}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield messages
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture(autouse=True)
def _no_ambient_config(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing from the developer's shell may steer these tests off loopback."""
    for name in (
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "ANTHROPIC_PROFILE",
        "ANTHROPIC_CUSTOM_HEADERS",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
