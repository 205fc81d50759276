"""Python agents for Switchboard, over the Rust SDK.

``switchboard.Agent`` sends through the SDK's durable local outbox (the privacy
gate first, then a local SQLite write, then delivery with stable idempotency keys,
retries with decorrelated jitter honouring ``Retry-After``, ordered per room) and
consumes the inbox with the SDK's consumer (claims, leases extended while the
handler runs, local dedup, local poison quarantine)::

    import switchboard

    with switchboard.Agent(server=URL, token=TOKEN, state="state/", name="reviewer") as agent:
        agent.send("writer", {"text": "draft ready?"})   # durable in the outbox on return
        agent.flush(timeout=10)                           # sent, or FlushTimeout
        agent.run(lambda event: print(event.payload))     # until nothing is claimable

``switchboard.AsyncAgent`` offers the same calls to asyncio code, and the inbox as
an async iterator::

    async with switchboard.AsyncAgent(server=URL, token=TOKEN, state="state/", name="reviewer") as agent:
        await agent.send("writer", {"text": "draft ready?"})
        async for event in agent.events():
            print(event.payload)
            await event.ack()

A sidecar that should not hold a token of its own gets short-lived ones from the
local token broker (``switchboard agent broker``, run by the host that holds the
login), bound to a key made in memory::

    agent = switchboard.Agent.from_broker(agent="reviewer", state="state/")

Errors are ``switchboard.SwitchboardError`` subclasses (see ``switchboard.errors``);
the broker's refusals are ``ApiError`` with its ``code`` (``executable_not_allowed``,
``host_login_ended``, …).
"""

from __future__ import annotations

from ._asyncio import AsyncAgent
from ._switchboard import Agent, Event, EventStream, Receipt, RunStats, __version__
from .errors import (
    ApiError,
    ConsumerStopped,
    DeliveryRefused,
    FlushTimeout,
    LocalStateError,
    MessageTooLarge,
    OutboxFull,
    PrivacyRefused,
    SwitchboardError,
)

__all__ = [
    "Agent",
    "AsyncAgent",
    "Event",
    "EventStream",
    "Receipt",
    "RunStats",
    "__version__",
    "SwitchboardError",
    "ApiError",
    "DeliveryRefused",
    "PrivacyRefused",
    "OutboxFull",
    "MessageTooLarge",
    "FlushTimeout",
    "LocalStateError",
    "ConsumerStopped",
]
