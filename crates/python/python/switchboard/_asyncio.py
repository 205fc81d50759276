"""``AsyncAgent``: the same ``Agent`` for asyncio code.

Each blocking call runs in a worker thread (``asyncio.to_thread``) with the GIL
released, so the event loop keeps running. Handlers may be coroutine functions:
they run on the caller's event loop. Cancelling a task that awaits ``flush`` or
``run`` calls ``Agent.stop()`` and waits for the call to reach its safe point (the
event in flight finished, an attempt in flight ended) before the cancellation
propagates, so no outbox entry or claimed event is left half-done.

Not here yet (issue 40): ``events()`` with ``await event.ack()``, a native
(thread-less) bridge, and ``from_broker``.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
from typing import Any, Awaitable, Callable, TypeVar

from ._switchboard import Agent, Event, Receipt, RunStats

T = TypeVar("T")


class AsyncAgent:
    """``Agent`` for asyncio: the same arguments, awaitable calls.

    ::

        async with switchboard.AsyncAgent(server=URL, token=TOKEN, state=DIR, name=NAME) as agent:
            await agent.send("reviewer", {"text": "..."})
            await agent.flush(timeout=10)
            await agent.run(handle)        # handle may be ``async def``
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

    async def pending(self) -> int:
        return await asyncio.to_thread(self.agent.pending)

    async def close(self) -> None:
        """``Agent.close``: stops the background delivery."""
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
