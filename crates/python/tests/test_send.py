"""Sending: the outbox stores before the network, flush delivers, the server's
answers come back as exceptions with the problem document's code."""

from __future__ import annotations

import asyncio
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import switchboard
from conftest import BACKENDS, CTRL_C, Server, closed_port_url, each_backend


@pytest.fixture(params=BACKENDS)
def server(request: pytest.FixtureRequest) -> Server:
    """The outbox's tests run against a server on SQLite and on PostgreSQL."""
    return each_backend(request)


def test_send_then_flush_puts_the_message_in_the_recipients_inbox(
    server: Server, names, tmp_path: Path
) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)
    with switchboard.Agent(server=server.url, token=alice_token, state=tmp_path, deliver=False) as agent:
        receipt = agent.send(bob, {"text": "hello bob", "tags": ["a"]}, correlation_id="c-1")
        assert receipt.target == f"agent:{bob}"
        assert receipt.stripped == []
        assert agent.entry(receipt.outbox_id)["state"] == "queued", "deliver=False: not sent yet"
        assert server.inbox(bob, bob_token) == [], "nothing reaches the server before flush"
        agent.flush(timeout=10)
        entry = agent.entry(receipt.outbox_id)
        assert entry["state"] == "sent", entry
        assert agent.pending() == 0
    events = server.inbox(bob, bob_token)
    assert len(events) == 1, events
    assert events[0]["payload"] == {"text": "hello bob", "tags": ["a"]}
    assert events[0]["sender"]["name"] == alice
    assert events[0]["correlation_id"] == "c-1"
    assert entry["receipt"]["event_id"] == events[0]["event_id"], "the receipt names the event"


def test_background_delivery_sends_without_flush(server: Server, names, tmp_path: Path) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)
    with switchboard.Agent(server=server.url, token=alice_token, state=tmp_path) as agent:
        agent.send(bob, {"text": "in the background"})
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not server.inbox(bob, bob_token):
            time.sleep(0.05)
    assert [e["payload"]["text"] for e in server.inbox(bob, bob_token)] == ["in the background"]


def test_the_gate_strips_members_the_schema_does_not_allow(
    server: Server, names, tmp_path: Path
) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)
    with switchboard.Agent(server=server.url, token=alice_token, state=tmp_path) as agent:
        receipt = agent.send(bob, {"text": "t", "internal": {"score": 3}})
        assert receipt.stripped == ["$.internal"]
        agent.flush(timeout=10)
    assert [e["payload"] for e in server.inbox(bob, bob_token)] == [{"text": "t"}]


def test_custom_schemas_define_message_types(server: Server, names, tmp_path: Path) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)
    schemas = {"task": {"fields": {"title": "text", "priority": "integer"}}}
    with switchboard.Agent(
        server=server.url, token=alice_token, state=tmp_path, schemas=schemas
    ) as agent:
        agent.send(bob, {"title": "index", "priority": 2}, message_type="task")
        with pytest.raises(switchboard.PrivacyRefused) as refused:
            agent.send(bob, {"text": "hi"})  # "message" is not in these schemas
        assert refused.value.rules == ["schema.unknown_message_type"]
        agent.flush(timeout=10)
    assert [e["payload"] for e in server.inbox(bob, bob_token)] == [{"title": "index", "priority": 2}]


def test_posts_reach_every_member_in_order(server: Server, names, tmp_path: Path) -> None:
    alice, bob, room = next(names), next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)
    status, body = server.call("POST", "/api/v1/rooms", server.operator, {"name": room})
    assert status == 201, body
    for member in (alice, bob):
        status, body = server.call("PUT", f"/api/v1/rooms/{room}/members/{member}", server.operator)
        assert status in (200, 204), body
    with switchboard.Agent(server=server.url, token=alice_token, state=tmp_path) as agent:
        for i in range(5):
            assert agent.post(room, {"text": f"m{i}"}).target == f"room:{room}"
        agent.flush(timeout=10)
    texts = [e["payload"]["text"] for e in server.inbox(bob, bob_token)]
    assert texts == [f"m{i}" for i in range(5)], "one lane per room: sent in order"


def test_a_refused_message_raises_delivery_refused_with_the_problem_code(
    server: Server, names, tmp_path: Path
) -> None:
    alice = next(names)
    token = server.create_agent(alice)
    with switchboard.Agent(server=server.url, token=token, state=tmp_path, deliver=False) as agent:
        receipt = agent.send("no-such-agent", {"text": "anyone?"})
        with pytest.raises(switchboard.DeliveryRefused) as refused:
            agent.flush(timeout=10)
        error = refused.value
        assert isinstance(error, switchboard.ApiError)
        assert (error.status, error.code) == (404, "not_found"), error
        assert error.outbox_id == receipt.outbox_id
        assert agent.entry(receipt.outbox_id)["state"] == "poison"
        agent.flush(timeout=1)  # reported once; nothing is left to send


def test_flush_raises_flush_timeout_while_the_server_is_unreachable(tmp_path: Path) -> None:
    with switchboard.Agent(server=closed_port_url(), token="t", state=tmp_path) as agent:
        receipt = agent.send("bob", {"text": "later"})
        with pytest.raises(switchboard.FlushTimeout) as timed_out:
            agent.flush(timeout=0.5)
        assert isinstance(timed_out.value, TimeoutError)
        assert timed_out.value.pending == 1
        assert "later" not in str(timed_out.value), "errors never hold payload text"
        assert agent.entry(receipt.outbox_id)["state"] in ("queued", "retryable")


def test_payloads_must_be_json(tmp_path: Path) -> None:
    with switchboard.Agent(server=closed_port_url(), token="t", state=tmp_path) as agent:
        with pytest.raises(TypeError, match=r"\$\.when"):
            agent.send("bob", {"text": "x", "when": object()})
        with pytest.raises(ValueError, match="NaN"):
            agent.check({"text": "x", "priority": float("nan")})
        assert agent.pending() == 0


def test_flush_waits_for_an_attempt_in_flight_at_most_the_request_timeout(tmp_path: Path) -> None:
    silent = silent_server()
    url = "http://127.0.0.1:%d" % silent.getsockname()[1]
    try:
        with switchboard.Agent(
            server=url, token="t", state=tmp_path, deliver=False, request_timeout=1.0
        ) as agent:
            receipt = agent.send("bob", {"text": "into the void"})
            started = time.monotonic()
            with pytest.raises(switchboard.FlushTimeout):
                agent.flush(timeout=0.2)
            assert time.monotonic() - started < 5, "bounded by the request timeout"
            entry = agent.entry(receipt.outbox_id)
            assert entry["state"] == "retryable", "a timeout is transient: tried again later"
            assert entry["attempts"] == 1
    finally:
        silent.close()


def silent_server() -> socket.socket:
    """A server that accepts connections (the kernel does, into the backlog) and
    never answers."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    return silent


FLUSH_THEN_CTRL_C = textwrap.dedent(
    """
    import sys, switchboard
    server, token, state, to = sys.argv[1:5]
    agent = switchboard.Agent(server=server, token=token, state=state, deliver=False,
                              request_timeout=1.0)
    receipt = agent.send(to, {"text": "interrupted"})
    print("flushing", flush=True)
    try:
        agent.flush(timeout=60)
    except KeyboardInterrupt:
        print("interrupted", agent.entry(receipt.outbox_id)["state"], flush=True)
        agent.close()
        sys.exit(3)
    """
)


def test_ctrl_c_stops_a_flush_cleanly_and_the_entry_is_sent_once_later(
    server: Server, names, tmp_path: Path
) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)
    silent = silent_server()
    url = "http://127.0.0.1:%d" % silent.getsockname()[1]
    try:
        child = subprocess.Popen(
            [sys.executable, "-c", CTRL_C + FLUSH_THEN_CTRL_C, url, alice_token, str(tmp_path), bob],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert child.stdout.readline().strip() == "flushing"
        time.sleep(0.3)  # the attempt is in flight, waiting for an answer
        started = time.monotonic()
        child.send_signal(signal.SIGINT)
        out, err = child.communicate(timeout=15)
    finally:
        silent.close()
    assert child.returncode == 3, (out, err)
    assert time.monotonic() - started < 5, "at most the attempt in flight (1 s) is waited for"
    # The attempt in flight ended (timed out) before KeyboardInterrupt: the entry is
    # waiting for a retry, not stuck as "sending".
    assert out.split() == ["interrupted", "retryable"], out
    with switchboard.Agent(server=server.url, token=alice_token, state=tmp_path) as agent:
        agent.flush(timeout=10)
    assert [e["payload"]["text"] for e in server.inbox(bob, bob_token)] == ["interrupted"]


def test_cancelling_an_async_flush_keeps_the_entry(server: Server, names, tmp_path: Path) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)
    silent = silent_server()
    url = "http://127.0.0.1:%d" % silent.getsockname()[1]

    async def main() -> str:
        async with switchboard.AsyncAgent(
            server=url, token=alice_token, state=tmp_path, deliver=False, request_timeout=1.0
        ) as agent:
            receipt = await agent.send(bob, {"text": "kept"})
            task = asyncio.create_task(agent.flush(timeout=60))
            await asyncio.sleep(0.3)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return agent.agent.entry(receipt.outbox_id)["state"]

    try:
        assert asyncio.run(main()) == "retryable"
    finally:
        silent.close()
    with switchboard.Agent(server=server.url, token=alice_token, state=tmp_path) as agent:
        agent.flush(timeout=10)
    assert [e["payload"]["text"] for e in server.inbox(bob, bob_token)] == ["kept"]
