"""`tiered-memory serve` started as a real subprocess on a store in a temporary folder,
talked to with the MCP SDK's own client: over stdio (the client spawns the server), or
over streamable HTTP on loopback (the fixture spawns it and reads its address).

The store is embedded SQLite with the configured default embedder (hashing): offline
and deterministic. Seeding and checking go through the Python API on the same file.
Every process a fixture starts is stopped (SIGTERM, then SIGKILL) when it ends.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult

ROOT = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 120.0  # imports alone take seconds on a loaded machine

TOKEN_A = "alice-token-0123456789abcdef"
TOKEN_B = "bob-token-0123456789abcdefgh"


def server_env(tmp_path: Path) -> dict[str, str]:
    """This tree first on the path; no TIERED_MEMORY_* of the machine; data in tmp."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("TIERED_MEMORY_")}
    paths = [str(ROOT / "core"), str(ROOT)]
    if env.get("PYTHONPATH"):
        paths.append(env["PYTHONPATH"])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env["XDG_DATA_HOME"] = str(tmp_path / "xdg-data")
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg-config")
    env["PYTHONUNBUFFERED"] = "1"
    return env


def serve_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "tiered_memory.cli", "serve", *args]


def stdio_client(tmp_path: Path, db: Path, *args: str) -> Client:
    argv = serve_argv("--db", str(db), *args)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=server_env(tmp_path))
    return Client(params, read_timeout_seconds=STARTUP_SECONDS)


def data(result: CallToolResult) -> Any:
    """A tool's structured result; a tool error fails the test with its message."""
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


def error_text(result: CallToolResult) -> str:
    assert result.is_error, result.structured_content
    return " ".join(getattr(block, "text", "") for block in result.content)


@dataclass
class HttpServer:
    url: str
    db: Path
    process: subprocess.Popen[str]
    stderr: list[str]


def start_http(tmp_path: Path, db: Path, *args: str) -> HttpServer:
    """Spawn `serve --transport http --port 0` and wait for the address it prints."""
    process = subprocess.Popen(
        serve_argv("--transport", "http", "--port", "0", "--db", str(db), *args),
        env=server_env(tmp_path),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()
    seen: list[str] = []

    def pump() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            seen.append(line)
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    try:
        while True:
            line = lines.get(timeout=STARTUP_SECONDS)
            if line is None:
                raise AssertionError(f"the server exited before listening: {''.join(seen)}")
            if "serving MCP" in line:
                url = line.split(" at ", 1)[1].split()[0]
                return HttpServer(url, db, process, seen)
    except BaseException:
        stop(process)
        raise


def stop(process: subprocess.Popen[str]) -> int:
    """SIGTERM, then SIGKILL if it does not stop; returns the exit code."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
    return process.returncode


def write_tokens(path: Path, mapping: dict[str, str]) -> Path:
    path.write_text(json.dumps({"tokens": mapping}), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def token_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """One HTTP server for the module: token A reaches 'alice', token B 'bob'."""
    tmp_path = tmp_path_factory.mktemp("mcp-http")
    tokens = write_tokens(tmp_path / "tokens.json", {TOKEN_A: "alice", TOKEN_B: "bob"})
    server = start_http(tmp_path, tmp_path / "memory.db", "--tokens", str(tokens))
    yield server
    assert stop(server.process) == 0, "".join(server.stderr)
