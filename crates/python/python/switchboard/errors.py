"""The exceptions of the ``switchboard`` package.

::

    SwitchboardError
    ├── ApiError            .code .status .detail .kind: a call failed (a problem
    │   │                   document from the server, or the transport)
    │   └── DeliveryRefused .outbox_id .reason: the server refused an outbox entry
    ├── PrivacyRefused      .message_type .refusals .rules   (also a ValueError)
    ├── OutboxFull          .capacity
    ├── MessageTooLarge     .size .limit                     (also a ValueError)
    ├── FlushTimeout        .pending                         (also a TimeoutError)
    ├── LocalStateError     the local state file failed      (also an OSError)
    └── ConsumerStopped     .event_id: an events() event's outcome came too late

Attributes hold rules, paths and codes, never payload text. The compiled module
raises these classes and sets their attributes.
"""

from __future__ import annotations


class SwitchboardError(Exception):
    """Base class of every error this package raises."""


class ApiError(SwitchboardError):
    """A call to the server failed.

    ``code`` is the problem document's stable code (``None`` when the answer did not
    come from Switchboard, or no answer came; the local token broker's own codes,
    such as ``executable_not_allowed`` or ``host_login_ended``, come here too), ``status`` the HTTP status (``None``
    without one), ``detail`` the problem's detail, ``kind`` what failed (``api``,
    ``transport``, ``timeout``, ``decode``, ``login``, ``invalid_url``, …).
    """

    code: str | None = None
    status: int | None = None
    detail: str | None = None
    kind: str = "api"


class DeliveryRefused(ApiError):
    """The server refused an outbox entry for good: it is POISON in the local
    outbox. ``outbox_id`` names it; ``reason`` is the stored reason, from which
    ``status``, ``code`` and ``detail`` are read."""

    outbox_id: int = 0
    reason: str = ""


class PrivacyRefused(SwitchboardError, ValueError):
    """The privacy gate refused a payload before anything was stored or sent.

    ``refusals`` says why (rules and JSON paths, never the data); ``rules`` holds
    the stable codes (``credential.jwt``, ``pii.ssn``,
    ``schema.unknown_message_type``, …); ``message_type`` is the type checked.
    """

    message_type: str = ""
    refusals: list[str] = []
    rules: list[str] = []


class OutboxFull(SwitchboardError):
    """The local outbox holds ``capacity`` unsent entries; is the server reachable?"""

    capacity: int = 0


class MessageTooLarge(SwitchboardError, ValueError):
    """The message body (``size`` bytes) is over the server's ``limit``; send a
    reference to the data instead."""

    size: int = 0
    limit: int = 0


class FlushTimeout(SwitchboardError, TimeoutError):
    """``flush()`` ran out of time with ``pending`` entries unsent. They stay in
    the outbox and are sent later (by this agent, or the next one on the same
    state directory)."""

    pending: int = 0


class LocalStateError(SwitchboardError, OSError):
    """The local state file (outbox, consumer state) failed: not writable, disk
    full, locked by another process for longer than the busy timeout."""


class ConsumerStopped(SwitchboardError):
    """``await event.ack()`` (or ``release``, ``quarantine``) of an ``events()``
    event whose consumer stopped before applying it: the stream was closed, or the
    consumer failed (the stream's next ``__anext__`` raises why). The event returns
    when its lease ends; if it was handled, dedup acks it then without handing it
    out again."""

    event_id: str = ""


__all__ = [
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
