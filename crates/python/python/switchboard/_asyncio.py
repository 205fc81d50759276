"""``AsyncAgent``: the same ``Agent`` for asyncio code.

``events()`` is native: an async iterator whose awaitables are futures on the
package's tokio runtime (pyo3-async-runtimes), no thread per call; each event gets
its outcome with ``await event.ack()``, ``await event.release(...)`` or ``await
event.quarantine(reason)``. Cancelling a wait for the next event takes nothing;
closing the stream (``async with``, ``aclose()``, or this agent closing) releases an
event left without an outcome, at once.

The other calls run in a worker thread (``asyncio.to_thread``) with the GIL
released, so the event loop keeps running. ``run`` handlers may be coroutine
functions: they run on the caller's event loop. Cancelling a task that awaits
``flush`` or ``run`` calls ``Agent.stop()`` and waits for the call to reach its safe
point (the event in flight finished, an attempt in flight ended) before the
cancellation propagates, so no outbox entry or claimed event is left half-done.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
from typing import Any, Awaitable, Callable, TypeVar

from ._switchboard import Agent, Event, EventStream, Receipt, RunStats

T = TypeVar("T")


class AsyncAgent:
    """``Agent`` for asyncio: the same arguments, awaitable calls.

    ::

        async with switchboard.AsyncAgent(server=URL, token=TOKEN, state=DIR, name=NAME) as agent:
            await agent.send("reviewer", {"text": "..."})
            await agent.flush(timeout=10)
            async for event in agent.events():
                ...
                await event.ack()          # or: await event.release(error="...")

    ``await agent.run(handle)`` is the other way to consume (``handle`` may be
    ``async def``). Leaving ``async with`` closes every stream ``events()`` opened
    (releasing an event left without an outcome), then stops the background
    delivery.
    """

    def __init__(
        self,
        *,
        server: str,
        token: str,
        state: str | os.PathLike[str],
        name: str | None = None,
        schemas: str | dict[str, Any] | None = None,
        deliver: bool = True,
        request_timeout: float = 30.0,
    ) -> None:
        self.agent = Agent(
            server=server,
            token=token,
            state=state,
            name=name,
            schemas=schemas,
            deliver=deliver,
            request_timeout=request_timeout,
        )

    @classmethod
    def from_broker(
        cls,
        *,
        agent: str,
        state: str | os.PathLike[str],
        socket: str | os.PathLike[str] | None = None,
        scope: str | None = None,
        schemas: str | dict[str, Any] | None = None,
        deliver: bool = True,
        request_timeout: float = 30.0,
    ) -> AsyncAgent:
        """``Agent.from_broker`` for asyncio: tokens from the local token broker
        (``switchboard agent broker``), renewed in the background. It asks the
        broker for the first token before it returns (a local call, quick)."""
        made = cls.__new__(cls)
        made.agent = Agent.from_broker(
            agent=agent,
            state=state,
            socket=socket,
            scope=scope,
            schemas=schemas,
            deliver=deliver,
            request_timeout=request_timeout,
        )
        return made

    async def __aenter__(self) -> AsyncAgent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def send(self, to: str, payload: Any, **options: Any) -> Receipt:
        """``Agent.send``: gate, durable write, return."""
        return await asyncio.to_thread(self.agent.send, to, payload, **options)

    async def post(self, room: str, payload: Any, **options: Any) -> Receipt:
        """``Agent.post``."""
        return await asyncio.to_thread(self.agent.post, room, payload, **options)

    def check(self, payload: Any, *, message_type: str | None = None) -> Any:
        """``Agent.check`` (local and quick, so not awaited)."""
        return self.agent.check(payload, message_type=message_type)

    async def flush(self, timeout: float = 10.0) -> None:
        """``Agent.flush``; cancelling it stops it at a safe point."""
        await self._stoppable(self.agent.flush, timeout)

    async def run(
        self, handler: Callable[[Event], object | Awaitable[object]], **options: Any
    ) -> RunStats:
        """``Agent.run``; ``handler`` may be a coroutine function (it runs on this
        event loop). Cancelling it ends the run at a safe point."""
        loop = asyncio.get_running_loop()

        def call(event: Event) -> None:
            result = handler(event)
            if inspect.isawaitable(result):
                asyncio.run_coroutine_threadsafe(_awaited(result), loop).result()

        return await self._stoppable(self.agent.run, call, **options)

    def events(
        self,
        *,
        stop_when_idle: bool = False,
        lease_seconds: int = 60,
        batch: int = 1,
        max_local_failures: int = 3,
        retry_base: float = 1.0,
    ) -> EventStream:
        """The inbox as an async iterator (``Agent.events``): ``async for event in
        agent.events(): ...; await event.ack()``. Waits for events forever unless
        ``stop_when_idle``; closed with this agent. Needs ``name``."""
        return self.agent.events(
            stop_when_idle=stop_when_idle,
            lease_seconds=lease_seconds,
            batch=batch,
            max_local_failures=max_local_failures,
            retry_base=retry_base,
        )

    async def pending(self) -> int:
        """``Agent.pending``: outbox entries not yet sent."""
        return await asyncio.to_thread(self.agent.pending)

    async def close(self) -> None:
        """``Agent.close``: closes the streams ``events()`` opened (an event
        without an outcome is released, waiting acks are sent) and stops the
        background delivery."""
        await asyncio.to_thread(self.agent.close)

    async def _stoppable(self, call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        work = asyncio.ensure_future(asyncio.to_thread(call, *args, **kwargs))
        try:
            return await asyncio.shield(work)
        except asyncio.CancelledError:
            self.agent.stop()
            # The call ends at its safe point; the loop keeps running meanwhile, so
            # an async handler in flight can finish.
            with contextlib.suppress(BaseException):
                await work
            raise


async def _awaited(awaitable: Awaitable[T]) -> T:
    return await awaitable
