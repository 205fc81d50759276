"""``events()``: the inbox as an async iterator; each event's outcome from
``await event.ack()`` / ``release`` / ``quarantine``; cancellation and close lose
no claimed event."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import switchboard
from conftest import CTRL_C, Server
from test_run import send_all


def consumer(server: Server, token: str, state: Path, name: str) -> switchboard.AsyncAgent:
    return switchboard.AsyncAgent(server=server.url, token=token, state=state, name=name)


def test_async_for_with_ack_handles_each_event_once_in_order(
    server: Server, names, tmp_path: Path
) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)

    async def main() -> list[switchboard.Event]:
        async with switchboard.AsyncAgent(
            server=server.url, token=alice_token, state=tmp_path / "alice"
        ) as sender:
            for text in ("one", "two", "three"):
                await sender.send(bob, {"text": text})
            await sender.flush(timeout=10)
        seen: list[switchboard.Event] = []
        async with consumer(server, bob_token, tmp_path / "bob", bob) as agent:
            async for event in agent.events(stop_when_idle=True):
                seen.append(event)
                await event.ack()
            with pytest.raises(RuntimeError, match="already has its outcome"):
                await seen[0].ack()
            async for event in agent.events(stop_when_idle=True):
                raise AssertionError(f"acked events come back: {event}")
        return seen

    seen = asyncio.run(main())
    assert [e.payload["text"] for e in seen] == ["one", "two", "three"]
    assert all(e.sender == alice and e.attempts == 1 for e in seen)
    for event in seen:
        assert server.event(event.event_id)["status"] == "completed"


def test_release_with_an_error_counts_toward_the_quarantine(
    server: Server, names, tmp_path: Path
) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)
    send_all(server, alice_token, tmp_path / "alice", bob, ["poison pill"])

    async def main() -> tuple[list[int], list[dict]]:
        failures: list[int] = []
        async with consumer(server, bob_token, tmp_path / "bob", bob) as agent:
            # retry_base=0: released with no delay, so one stream sees each attempt.
            stream = agent.events(stop_when_idle=True, max_local_failures=2, retry_base=0.0)
            async for event in stream:
                failures.append(event.local_failures)
                await event.release("ValueError: cannot parse")
            return failures, agent.agent.quarantined()

    failures, quarantined = asyncio.run(main())
    assert failures == [0, 1], "handed out max_local_failures times, no more"
    [poisoned] = quarantined
    assert poisoned["failures"] == 2 and "cannot parse" in poisoned["reason"]
    assert server.event(poisoned["event_id"])["status"] == "quarantined"


def test_release_with_a_delay_is_not_a_failure_and_quarantine_is_at_once(
    server: Server, names, tmp_path: Path
) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)
    send_all(server, alice_token, tmp_path / "alice", bob, ["later", "never"])

    async def main() -> list[str]:
        ids: list[str] = []
        async with consumer(server, bob_token, tmp_path / "bob", bob) as agent:
            async for event in agent.events(stop_when_idle=True):
                ids.append(event.event_id)
                if event.payload["text"] == "later":
                    with pytest.raises(ValueError, match="not both"):
                        await event.release("x", delay=1)
                    await event.release(delay=60)
                else:
                    await event.quarantine("the schema will never match")
            assert agent.agent.quarantined()[0]["event_id"] == ids[1]
        return ids

    later, never = asyncio.run(main())
    delayed = server.event(later)
    assert delayed["status"] == "pending", delayed
    assert server.event(never)["status"] == "quarantined"


def test_the_next_event_needs_an_outcome_for_the_previous(
    server: Server, names, tmp_path: Path
) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)
    send_all(server, alice_token, tmp_path / "alice", bob, ["a", "b"])

    async def main() -> None:
        async with consumer(server, bob_token, tmp_path / "bob", bob) as agent:
            events = agent.events(stop_when_idle=True)
            first = await events.__anext__()
            with pytest.raises(RuntimeError, match="no outcome yet"):
                await events.__anext__()
            await first.ack()
            second = await events.__anext__()
            assert second.payload["text"] == "b"
            await second.ack()
            with pytest.raises(StopAsyncIteration):
                await events.__anext__()

    asyncio.run(main())


def test_cancelling_the_loop_releases_the_held_event_at_once(
    server: Server, names, tmp_path: Path
) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)
    send_all(server, alice_token, tmp_path / "alice", bob, ["held"])
    held: list[switchboard.Event] = []

    async def hold(agent: switchboard.AsyncAgent) -> None:
        async for event in agent.events():
            held.append(event)
            await asyncio.sleep(3600)  # working on it, no outcome yet

    async def main() -> None:
        async with consumer(server, bob_token, tmp_path / "bob", bob) as agent:
            task = asyncio.create_task(hold(agent))
            while not held:
                await asyncio.sleep(0.02)
            assert server.event(held[0].event_id)["status"] == "claimed"
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        # Leaving `async with` closed the stream: the event is back, long before
        # its 60 s lease would have ended.

    asyncio.run(main())
    back = server.event(held[0].event_id)
    assert back["status"] == "pending", back

    async def again() -> list[switchboard.Event]:
        got: list[switchboard.Event] = []
        async with consumer(server, bob_token, tmp_path / "bob", bob) as agent:
            async for event in agent.events(stop_when_idle=True):
                got.append(event)
                await event.ack()
        return got

    [redelivered] = asyncio.run(again())
    assert redelivered.event_id == held[0].event_id
    assert (redelivered.attempts, redelivered.local_failures) == (2, 0), "not a failure"


def test_cancelling_a_wait_for_the_next_event_takes_nothing(
    server: Server, names, tmp_path: Path
) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)

    async def main() -> str:
        async with consumer(server, bob_token, tmp_path / "bob", bob) as agent:
            events = agent.events()  # waits for events (SSE wake-ups)
            with pytest.raises(TimeoutError):
                await asyncio.wait_for(events.__anext__(), 0.5)
            send_all(server, alice_token, tmp_path / "alice", bob, ["after"])
            event = await asyncio.wait_for(events.__anext__(), 10)
            await event.ack()
            await events.aclose()
            assert events.closed
            return event.event_id

    event_id = asyncio.run(main())
    assert server.event(event_id)["status"] == "completed", "the close sent the ack"


def test_a_bad_token_ends_the_stream_with_api_error(server: Server, names, tmp_path: Path) -> None:
    name = next(names)
    server.create_agent(name)

    async def main() -> None:
        async with consumer(server, "sb_not_a_token", tmp_path, name) as agent:
            with pytest.raises(switchboard.ApiError) as raised:
                async for _ in agent.events():
                    pass
            assert raised.value.code == "unauthorized"

    asyncio.run(main())


def test_run_events_cannot_be_acked_by_hand(server: Server, names, tmp_path: Path) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)
    send_all(server, alice_token, tmp_path / "alice", bob, ["x"])
    seen: list[switchboard.Event] = []
    with switchboard.Agent(server=server.url, token=bob_token, state=tmp_path / "bob", name=bob) as agent:
        agent.run(seen.append)

    async def ack() -> None:
        await seen[0].ack()

    with pytest.raises(RuntimeError, match="run\\(\\) handler"):
        asyncio.run(ack())


HOLDS_AN_EVENT = textwrap.dedent(
    """
    import asyncio, sys, switchboard

    async def main():
        async with switchboard.AsyncAgent(
            server=sys.argv[1], token=sys.argv[2], state=sys.argv[3], name=sys.argv[4]
        ) as agent:
            async for event in agent.events():
                print("holding", event.event_id, flush=True)
                await asyncio.sleep(3600)

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        print("interrupted", flush=True)
        sys.exit(3)
    """
)


def test_ctrl_c_in_an_async_for_releases_the_held_event(
    server: Server, names, tmp_path: Path
) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)
    send_all(server, alice_token, tmp_path / "alice", bob, ["held"])
    child = subprocess.Popen(
        [sys.executable, "-c", CTRL_C + HOLDS_AN_EVENT, server.url, bob_token, str(tmp_path / "bob"), bob],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = child.stdout.readline().split()
    assert line[:1] == ["holding"], (line, child.stderr.read() if child.poll() is not None else "")
    event_id = line[1]
    assert server.event(event_id)["status"] == "claimed"
    started = time.monotonic()
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=15)
    assert child.returncode == 3, (out, err)
    assert time.monotonic() - started < 5, "it stops promptly"
    back = server.event(event_id)
    assert back["status"] == "pending", ("released, not left to its lease", back)
