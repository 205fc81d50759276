"""Type stubs of the compiled module (``switchboard._switchboard``); import the
names from ``switchboard``."""

from __future__ import annotations

import os
import pathlib
from types import TracebackType
from typing import Any, Callable, TypedDict, final

__version__: str

JSON = dict[str, Any] | list[Any] | str | int | float | bool | None

class OutboxEntry(TypedDict):
    id: int
    target: dict[str, str]
    message_type: str
    state: str  # queued, sending, retryable, sent, poison, expired
    attempts: int
    next_attempt_at: int
    last_error: str | None
    first_attempt_at: int | None
    created_at: int
    updated_at: int
    receipt: dict[str, Any] | None

class LocalPoison(TypedDict):
    event_id: str
    seq: int
    failures: int
    reason: str | None
    at: int

@final
class Receipt:
    """The message is durable in the local outbox; it is delivered in the
    background, or by ``Agent.flush()``."""

    @property
    def outbox_id(self) -> int: ...
    @property
    def target(self) -> str:
        """``agent:<name>`` or ``room:<name>``."""
    @property
    def stripped(self) -> list[str]:
        """JSON paths the privacy gate removed (not in the schema)."""

@final
class RunStats:
    """What one ``Agent.run()`` did."""

    @property
    def handled(self) -> int: ...
    @property
    def acked(self) -> int: ...
    @property
    def deduplicated(self) -> int: ...
    @property
    def poisoned(self) -> int: ...
    @property
    def claims(self) -> int: ...

@final
class Event:
    """One inbox event, handed to a ``run()`` handler or by an ``events()``
    stream. From ``run()``: returning acks it, raising releases it (a local
    failure). From ``events()``: give it an outcome with ``ack``, ``release`` or
    ``quarantine`` (``RuntimeError`` on a ``run()`` event)."""

    @property
    def event_id(self) -> str: ...
    @property
    def sequence_number(self) -> int: ...
    @property
    def payload(self) -> Any: ...
    @property
    def sender(self) -> str:
        """The sending agent's name, or ``"operator"``."""
    @property
    def attempts(self) -> int: ...
    @property
    def local_failures(self) -> int: ...
    @property
    def priority(self) -> int: ...
    @property
    def correlation_id(self) -> str | None: ...
    @property
    def room_id(self) -> str | None: ...
    async def ack(self) -> None:
        """Done. Returns once the consumer has recorded it as handled in the state
        file; the server's ack rides with the next claim (or the stream's close),
        and a redelivery meanwhile is acked without being handed out again.
        ``ConsumerStopped`` if the consumer stopped first."""
    async def release(self, error: str | None = None, *, delay: float | None = None) -> None:
        """Claimable again. Without ``error``: not now, after ``delay`` seconds
        (default: a backoff), not a failure. With ``error``: a local failure,
        released after a backoff; the ``max_local_failures``th quarantines it.
        Returns once the server has it back."""
    async def quarantine(self, reason: str) -> None:
        """It can never succeed: quarantined locally and on the server, now."""

@final
class EventStream:
    """The inbox as an async iterator (``Agent.events()``). One event at a time:
    the next comes once the previous has its outcome (else ``RuntimeError``).
    Closing (``aclose``, ``async with``) releases an event left without an
    outcome, releases claimed events not handed out, sends waiting acks and stops
    the consumer."""

    def __aiter__(self) -> EventStream: ...
    async def __anext__(self) -> Event:
        """The next event. ``StopAsyncIteration`` once the consumer ended
        (``stop_when_idle`` and nothing claimable, or closed); the consumer's error
        (``ApiError``, ``LocalStateError``) if it failed."""
    async def aclose(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    async def __aenter__(self) -> EventStream: ...
    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

@final
class Agent:
    """A Switchboard agent over the Rust SDK: a durable outbox, the privacy gate
    and the inbox consumer, with its state in one local file under ``state``."""

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
    ) -> None: ...
    @staticmethod
    def from_broker(
        *,
        agent: str,
        state: str | os.PathLike[str],
        socket: str | os.PathLike[str] | None = None,
        scope: str | None = None,
        schemas: str | dict[str, Any] | None = None,
        deliver: bool = True,
        request_timeout: float = 30.0,
    ) -> Agent:
        """An agent whose tokens come from the local token broker
        (``switchboard agent broker``): short-lived, no wider than the broker's
        policy allows ``agent`` (and ``scope``, space-separated, when given),
        bound to a key made in memory, renewed before expiry and on a 401.
        ``socket`` defaults to ``$SWITCHBOARD_BROKER_SOCKET``, else
        ``$XDG_RUNTIME_DIR/switchboard/broker.sock``, else
        ``/tmp/switchboard-<uid>/broker.sock``. Raises ``ApiError`` with the
        broker's ``code`` (``executable_not_allowed``, ``agent_not_allowed``,
        ``scope_not_allowed``, ``peer_refused``, ``host_login_ended``, …), or with
        ``kind == "login"`` when no broker answers."""
    @property
    def name(self) -> str | None: ...
    @property
    def state_file(self) -> pathlib.Path: ...
    def send(
        self,
        to: str,
        payload: JSON,
        *,
        message_type: str | None = None,
        correlation_id: str | None = None,
        priority: int | None = None,
    ) -> Receipt:
        """Gate, store durably, return. Raises ``PrivacyRefused``,
        ``MessageTooLarge``, ``OutboxFull``."""
    def post(
        self,
        room: str,
        payload: JSON,
        *,
        message_type: str | None = None,
        correlation_id: str | None = None,
        priority: int | None = None,
    ) -> Receipt:
        """Like ``send``, to a room; ordered per room."""
    def check(self, payload: JSON, *, message_type: str | None = None) -> JSON:
        """The privacy gate alone: the payload as it would be sent, or
        ``PrivacyRefused``. Nothing is stored or sent."""
    def flush(self, timeout: float = 10.0) -> None:
        """Deliver until the outbox is empty, or raise ``FlushTimeout`` /
        ``DeliveryRefused``."""
    def pending(self) -> int:
        """Outbox entries not yet sent."""
    def entry(self, outbox_id: int) -> OutboxEntry | None: ...
    def run(
        self,
        handler: Callable[[Event], object],
        *,
        stop_when_idle: bool = True,
        lease_seconds: int = 60,
        batch: int = 1,
        max_local_failures: int = 3,
        retry_base: float = 1.0,
    ) -> RunStats:
        """Claim, ``handler(event)``, ack; an exception releases; after
        ``max_local_failures`` the event is quarantined. Needs ``name``."""
    def events(
        self,
        *,
        stop_when_idle: bool = False,
        lease_seconds: int = 60,
        batch: int = 1,
        max_local_failures: int = 3,
        retry_base: float = 1.0,
    ) -> EventStream:
        """The inbox as an async iterator (asyncio): the consumer of ``run()``,
        with the outcome given per event (``await event.ack()``). Needs
        ``name``."""
    def quarantined(self, limit: int = 100) -> list[LocalPoison]: ...
    def stop(self) -> None:
        """End every ``flush``/``run`` in progress at its next safe point (from
        another thread); later calls are not affected."""
    def close(self) -> None:
        """Stop the background delivery (an entry in flight goes back to the
        queue) and every ``events()`` stream (an event without an outcome is
        released, waiting acks are sent); returns when that is done."""
    def __enter__(self) -> Agent: ...
    def __exit__(self, *exc: object) -> bool: ...
