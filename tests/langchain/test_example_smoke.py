"""examples/langchain_chatbot.py runs offline, end to end, as a user would run it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langchain_chatbot.py"

# The child runs the example as __main__ with sockets disabled, so "offline" is
# enforced, not just hoped for (Unix sockets stay: event loops wake through them).
OFFLINE_RUN = (
    "import runpy, sys, pytest_socket; "
    "pytest_socket.disable_socket(allow_unix_socket=True); "
    "runpy.run_path(sys.argv[1], run_name='__main__')"
)


def test_chatbot_example_runs_offline() -> None:
    env = {
        k: v
        for k, v in os.environ.items()
        if k != "ANTHROPIC_API_KEY" and not k.startswith(("LANGSMITH_", "LANGCHAIN_"))
    }
    env["HF_HUB_OFFLINE"] = "1"
    done = subprocess.run(
        [sys.executable, "-c", OFFLINE_RUN, str(EXAMPLE)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "model: scripted (offline)" in out
    # Tuesday's thread recalls what Alice said on Monday...
    tuesday = out.split("[day 1, alice, thread tuesday] user: What is my daughter called?")[1]
    injected = tuesday.split("assistant:")[0]
    assert "- My daughter is called Ava." in injected
    assert "From what you told me: My daughter is called Ava." in tuesday
    # ...the pin request goes through the memory tools...
    assert "tool memory_pin: Pinned" in out
    # ...and Bob's prompt never sees Alice's memories.
    bob = out.split("[day 2, bob, thread wednesday]")[1].split("[day 3")[0]
    assert "(nothing)" in bob
    assert "Ava" not in bob.split("assistant:")[0]
    assert "bob: 0 memories" in out
    assert "[hot procedural pinned] I always want answers in British English." in out
