"""The consumer: claim, handler(event), ack; an exception releases; the local
attempt limit quarantines; Ctrl-C stops cleanly."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import switchboard
from conftest import CTRL_C, Server


def send_all(server: Server, token: str, state: Path, to: str, texts: list[str]) -> None:
    with switchboard.Agent(server=server.url, token=token, state=state) as agent:
        for text in texts:
            agent.send(to, {"text": text})
        agent.flush(timeout=10)


def test_run_handles_and_acks_in_order(server: Server, names, tmp_path: Path) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)
    send_all(server, alice_token, tmp_path / "alice", bob, ["one", "two", "three"])
    seen: list[switchboard.Event] = []
    with switchboard.Agent(server=server.url, token=bob_token, state=tmp_path / "bob", name=bob) as agent:
        stats = agent.run(seen.append)
        assert [e.payload["text"] for e in seen] == ["one", "two", "three"]
        assert [e.sequence_number for e in seen] == sorted(e.sequence_number for e in seen)
        assert all(e.sender == alice and e.attempts == 1 for e in seen)
        assert (stats.handled, stats.acked) == (3, 3), stats
        assert agent.run(seen.append).handled == 0, "acked events are not claimed again"
    for event in seen:
        assert server.event(event.event_id)["status"] == "completed"


def test_an_exception_releases_the_event(server: Server, names, tmp_path: Path) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)
    send_all(server, alice_token, tmp_path / "alice", bob, ["flaky"])
    calls: list[int] = []

    def fail(event: switchboard.Event) -> None:
        calls.append(event.local_failures)
        raise RuntimeError("not today")

    with switchboard.Agent(server=server.url, token=bob_token, state=tmp_path / "bob", name=bob) as agent:
        stats = agent.run(fail)  # released with a backoff (>= 1 s): then idle
        assert (stats.handled, stats.acked, stats.poisoned) == (0, 0, 0), stats
        [event] = server.inbox(bob, bob_token)
        seen = server.event(event["event_id"])
        assert seen["status"] == "pending", seen
        assert "RuntimeError: not today" in seen["last_error"], seen
        # Claimable again after the release delay; this time the handler succeeds.
        handled: list[switchboard.Event] = []
        deadline = time.monotonic() + 15
        while not handled and time.monotonic() < deadline:
            agent.run(handled.append)
            time.sleep(0.2)
        assert [e.local_failures for e in handled] == [1], "it counts the earlier failure"
        assert handled[0].attempts == 2
    assert calls == [0]
    assert server.event(event["event_id"])["status"] == "completed"


def test_the_local_attempt_limit_quarantines_with_a_terminal_release(
    server: Server, names, tmp_path: Path
) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)
    send_all(server, alice_token, tmp_path / "alice", bob, ["poison pill"])
    calls: list[str] = []

    def fail(event: switchboard.Event) -> None:
        calls.append(event.event_id)
        raise ValueError("cannot parse")

    with switchboard.Agent(server=server.url, token=bob_token, state=tmp_path / "bob", name=bob) as agent:
        # retry_base=0: released with no delay, so one run sees every attempt.
        stats = agent.run(fail, max_local_failures=2, retry_base=0.0)
        assert stats.poisoned == 1, stats
        assert len(calls) == 2, "the handler runs max_local_failures times, no more"
        [quarantined] = agent.quarantined()
        assert quarantined["event_id"] == calls[0]
        assert quarantined["failures"] == 2
        assert "cannot parse" in quarantined["reason"]
        assert agent.run(fail).claims >= 1
    assert len(calls) == 2, "a quarantined event is not handed out again"
    assert server.event(calls[0])["status"] == "quarantined"


def test_a_handler_can_send_a_reply(server: Server, names, tmp_path: Path) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)
    send_all(server, alice_token, tmp_path / "alice", bob, ["ping"])
    with switchboard.Agent(server=server.url, token=bob_token, state=tmp_path / "bob", name=bob) as agent:

        def reply(event: switchboard.Event) -> None:
            agent.send(event.sender, {"text": "pong", "subject": event.payload["text"]})

        assert agent.run(reply).handled == 1
        agent.flush(timeout=10)
    assert [e["payload"] for e in server.inbox(alice, alice_token)] == [
        {"text": "pong", "subject": "ping"}
    ]


def test_ctrl_c_stops_run_cleanly(server: Server, names, tmp_path: Path) -> None:
    bob = next(names)
    bob_token = server.create_agent(bob)
    script = textwrap.dedent(
        """
        import sys, switchboard
        agent = switchboard.Agent(server=sys.argv[1], token=sys.argv[2], state=sys.argv[3], name=sys.argv[4])
        print("running", flush=True)
        try:
            agent.run(lambda event: None, stop_when_idle=False)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
            agent.close()
            sys.exit(3)
        """
    )
    child = subprocess.Popen(
        [sys.executable, "-c", CTRL_C + script, server.url, bob_token, str(tmp_path), bob],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout.readline().strip() == "running"
    time.sleep(1.0)
    started = time.monotonic()
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=15)
    assert child.returncode == 3, (out, err)
    assert "interrupted" in out
    assert time.monotonic() - started < 5, "it stops promptly"


DIES_ON_SECOND = textwrap.dedent(
    """
    import os, signal, sys, switchboard
    agent = switchboard.Agent(server=sys.argv[1], token=sys.argv[2], state=sys.argv[3], name=sys.argv[4])

    def handle(event):
        if event.payload["text"] == "second":
            os.kill(os.getpid(), signal.SIGKILL)
        print("handled", event.payload["text"], flush=True)

    agent.run(handle, batch=2, lease_seconds=1)
    """
)


def test_a_redelivery_of_a_handled_event_is_acked_without_the_handler(
    server: Server, names, tmp_path: Path
) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)
    send_all(server, alice_token, tmp_path / "alice", bob, ["first", "second"])
    # Both claimed in one batch; "first" is handled (committed locally) and its ack
    # waits for the next claim, but the process dies in "second"'s handler.
    child = subprocess.run(
        [sys.executable, "-c", DIES_ON_SECOND, server.url, bob_token, str(tmp_path / "bob"), bob],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert child.returncode == -signal.SIGKILL, child
    assert child.stdout.splitlines() == ["handled first"], child
    [first, second] = server.inbox(bob, bob_token)
    assert server.event(first["event_id"])["status"] != "completed", "its ack was never sent"
    handled: list[str] = []
    deduplicated = 0
    deadline = time.monotonic() + 20
    with switchboard.Agent(server=server.url, token=bob_token, state=tmp_path / "bob", name=bob) as agent:
        while time.monotonic() < deadline and len(handled) < 1:
            stats = agent.run(lambda event: handled.append(event.payload["text"]))
            deduplicated += stats.deduplicated
            time.sleep(0.2)
        while time.monotonic() < deadline and deduplicated < 1:
            stats = agent.run(lambda event: handled.append(event.payload["text"]))
            deduplicated += stats.deduplicated
            time.sleep(0.2)
    assert handled == ["second"], "the handler never sees the handled event again"
    assert deduplicated == 1
    for event in (first, second):
        assert server.event(event["event_id"])["status"] == "completed"


def test_stop_ends_a_run_from_another_thread(server: Server, names, tmp_path: Path) -> None:
    import threading

    bob = next(names)
    token = server.create_agent(bob)
    with switchboard.Agent(server=server.url, token=token, state=tmp_path, name=bob) as agent:
        result: list[switchboard.RunStats] = []
        runner = threading.Thread(
            target=lambda: result.append(agent.run(lambda e: None, stop_when_idle=False))
        )
        runner.start()
        time.sleep(0.5)
        assert runner.is_alive(), "without stop_when_idle it waits for events"
        agent.stop()
        runner.join(timeout=5)
        assert not runner.is_alive() and len(result) == 1
        assert agent.run(lambda e: None).handled == 0, "later calls are not stopped"
