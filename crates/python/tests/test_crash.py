"""A send that returned survives `kill -9` of the Python process: the next Agent on
the same state directory delivers it, and the server stores it once (the entry's
idempotency key is stored with it)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import switchboard
from conftest import BACKENDS, Server, closed_port_url, each_backend

SENDER = textwrap.dedent(
    """
    import sys, time, switchboard
    server, token, state, to, count = sys.argv[1:6]
    agent = switchboard.Agent(server=server, token=token, state=state)
    for i in range(int(count)):
        agent.send(to, {"text": f"survivor {i}"})
    print("enqueued", flush=True)
    time.sleep(60)
    """
)


@pytest.fixture(params=BACKENDS)
def server(request: pytest.FixtureRequest) -> Server:
    """The outbox's tests run against a server on SQLite and on PostgreSQL."""
    return each_backend(request)


def send_then_kill(server_url: str, token: str, state: Path, to: str, count: int) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", SENDER, server_url, token, str(state), to, str(count)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout.readline().strip() == "enqueued"
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=10)
    assert child.returncode == -signal.SIGKILL


def test_a_send_survives_kill_9_before_any_delivery(server: Server, names, tmp_path: Path) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)
    # The killed process could not reach any server: its entry can only be on disk.
    send_then_kill(closed_port_url(), alice_token, tmp_path, bob, 1)
    assert server.inbox(bob, bob_token) == []
    with switchboard.Agent(server=server.url, token=alice_token, state=tmp_path) as agent:
        assert agent.pending() == 1
        agent.flush(timeout=10)
    assert [e["payload"]["text"] for e in server.inbox(bob, bob_token)] == ["survivor 0"]


def test_sends_killed_mid_delivery_are_stored_once(server: Server, names, tmp_path: Path) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)
    # Killed while its background delivery is sending: some entries are sent, one
    # may be SENDING (its answer lost), the rest queued. The next Agent resends the
    # unfinished ones with their stored keys.
    send_then_kill(server.url, alice_token, tmp_path, bob, 30)
    with switchboard.Agent(server=server.url, token=alice_token, state=tmp_path) as agent:
        agent.flush(timeout=20)
        assert agent.pending() == 0
    texts = [e["payload"]["text"] for e in server.inbox(bob, bob_token)]
    assert texts == [f"survivor {i}" for i in range(30)], "each once, in order"
