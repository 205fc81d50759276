"""AsyncAgent: the same Agent from asyncio code; async handlers; cancellation
stops at a safe point."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

import switchboard
from conftest import Server


def test_async_send_flush_and_run_with_an_async_handler(
    server: Server, names, tmp_path: Path
) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)

    async def main() -> list[str]:
        async with switchboard.AsyncAgent(
            server=server.url, token=alice_token, state=tmp_path / "alice"
        ) as sender:
            for text in ("a", "b"):
                await sender.send(bob, {"text": text})
            await sender.flush(timeout=10)
            assert await sender.pending() == 0
        seen: list[str] = []

        async def handle(event: switchboard.Event) -> None:
            await asyncio.sleep(0.01)  # runs on this loop
            seen.append(event.payload["text"])

        async with switchboard.AsyncAgent(
            server=server.url, token=bob_token, state=tmp_path / "bob", name=bob
        ) as consumer:
            stats = await consumer.run(handle)
            assert stats.acked == 2, stats
        return seen

    assert asyncio.run(main()) == ["a", "b"]
    assert all(server.event(e["event_id"])["status"] == "completed"
               for e in server.inbox(bob, bob_token))


def test_cancelling_a_run_stops_it_promptly(server: Server, names, tmp_path: Path) -> None:
    bob = next(names)
    token = server.create_agent(bob)

    async def main() -> float:
        async with switchboard.AsyncAgent(
            server=server.url, token=token, state=tmp_path, name=bob
        ) as agent:
            task = asyncio.create_task(agent.run(lambda e: None, stop_when_idle=False))
            await asyncio.sleep(0.5)
            assert not task.done()
            started = time.monotonic()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            took = time.monotonic() - started
            assert (await agent.run(lambda e: None)).handled == 0, "the agent still works"
            return took

    assert asyncio.run(main()) < 5
