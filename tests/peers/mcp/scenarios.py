"""Scenarios that drive `switchboard mcp` with the official Python MCP client (PyPI `mcp`).

Run by crates/cli/tests/mcp.rs, which starts a real Switchboard server and creates the
agents; this file only speaks MCP. Usage:

    python3 scenarios.py SCENARIO

Environment: SB_BIN (the switchboard binary), SB_URL (the server), SB_<AGENT>_TOKEN and
SB_<AGENT>_STATE for each agent used, SB_MODE ("legacy" for the 2025 initialize
handshake, or "2026-07-28" for discover + subscriptions/listen), SB_ARGS (extra
arguments for `switchboard mcp`, space separated), SB_OUT (a file a scenario may write
its findings to, as JSON). Exit status 0 is a pass; anything else printed is why not.
"""

import asyncio
import json
import os
import sys
import time

import jsonschema
from mcp import Client
from mcp.client.stdio import StdioServerParameters

MODE = os.environ.get("SB_MODE", "legacy")
INBOX = "switchboard://inbox"
TIMEOUT = float(os.environ.get("SB_TIMEOUT", "20"))


def server(agent, extra=()):
    """`switchboard mcp` as agent `agent`, logged in by environment."""
    env = {
        "SWITCHBOARD_SERVER": os.environ.get(f"SB_{agent.upper()}_URL") or os.environ["SB_URL"],
        "SWITCHBOARD_TOKEN": os.environ[f"SB_{agent.upper()}_TOKEN"],
        "SWITCHBOARD_STATE": os.environ[f"SB_{agent.upper()}_STATE"],
        "XDG_CONFIG_HOME": os.environ["SB_CONFIG"],
        "SWITCHBOARD_LOG": "warn",
        "PATH": os.environ.get("PATH", ""),
    }
    args = ["mcp", "--name", agent] + os.environ.get("SB_ARGS", "").split() + list(extra)
    return StdioServerParameters(command=os.environ["SB_BIN"], args=args, env=env)


class Session:
    """A connected client: on "legacy" the 2025 `initialize` handshake; otherwise
    "auto", which opens with `server/discover` and must settle on MODE."""

    def __init__(self, agent, extra=(), handler=None):
        mode = "legacy" if MODE == "legacy" else "auto"
        self.client = Client(server(agent, extra), mode=mode, message_handler=handler, read_timeout_seconds=TIMEOUT)

    async def __aenter__(self):
        c = await self.client.__aenter__()
        if MODE != "legacy":
            check(c.protocol_version == MODE, f"negotiated {c.protocol_version}, not {MODE}")
        return c

    async def __aexit__(self, *exc):
        return await self.client.__aexit__(*exc)


def client(agent, extra=(), handler=None):
    return Session(agent, extra, handler)


def check(condition, why):
    if not condition:
        raise AssertionError(why)


async def call(c, tool, args):
    """A tool call that must succeed; returns its structured content."""
    result = await c.call_tool(tool, args)
    text = " ".join(getattr(b, "text", "") for b in result.content)
    check(not result.is_error, f"{tool}({args}) failed: {text}")
    return result.structured_content, text


async def refused(c, tool, args):
    """A tool call that must be a tool error; returns (code, message)."""
    result = await c.call_tool(tool, args)
    text = " ".join(getattr(b, "text", "") for b in result.content)
    check(result.is_error, f"{tool}({args}) should have been refused, got: {text}")
    error = (result.structured_content or {}).get("error", {})
    check(error.get("code"), f"{tool}: the tool error has no code: {result}")
    return error["code"], error.get("message", "")


class Updates:
    """Counts `notifications/resources/updated` for the inbox, on either revision."""

    def __init__(self):
        self.count = 0
        self.event = asyncio.Event()

    async def handler(self, message):
        # On 2026-07-28 only the listen stream counts (see `subscribed`): a bare
        # notification outside it would not be the revision's delivery.
        if MODE == "legacy" and getattr(message, "method", None) == "notifications/resources/updated":
            if message.params.uri == INBOX:
                self.count += 1
                self.event.set()

    async def wait(self, what):
        try:
            await asyncio.wait_for(self.event.wait(), TIMEOUT)
        except asyncio.TimeoutError:
            raise AssertionError(f"no inbox notification came for {what} within {TIMEOUT} s")
        self.event.clear()


async def subscribed(c, updates, body):
    """Runs `body()` while subscribed to the inbox: resources/subscribe on the 2025
    revisions, a subscriptions/listen stream on 2026-07-28."""
    if MODE == "legacy":
        await c.session.subscribe_resource(INBOX)
        return await body()
    async with c.listen(resource_subscriptions=[INBOX]) as sub:
        check(INBOX in (sub.honored.resource_subscriptions or []), f"listen did not accept the inbox: {sub.honored}")

        async def pump():
            async for event in sub:
                if getattr(event, "uri", None) == INBOX:
                    updates.count += 1
                    updates.event.set()

        task = asyncio.create_task(pump())
        try:
            return await body()
        finally:
            task.cancel()


async def schemas():
    """Every tool has a description and a valid JSON Schema that takes good
    arguments and refuses bad ones."""
    async with client("alice") as c:
        negotiated = c.protocol_version
        if MODE == "legacy":
            check(c.protocol_version.startswith("2025-"), f"legacy negotiated {c.protocol_version}")
        tools = (await c.list_tools()).tools
        names = {t.name for t in tools}
        expected = {
            "send_message", "post_to_room", "read_room", "look_at_inbox", "claim_work",
            "complete_work", "release_work", "extend_claim", "acquire_lease", "renew_lease",
            "release_lease", "read_memory", "write_memory",
        }
        check(names == expected, f"tools: {sorted(names)}")
        for t in tools:
            check(t.description and len(t.description) > 30, f"{t.name}: no useful description")
            schema = t.input_schema
            jsonschema.validators.validator_for(schema).check_schema(schema)
            check(schema.get("type") == "object", f"{t.name}: not an object schema")
            for prop, spec in schema.get("properties", {}).items():
                check(spec.get("description"), f"{t.name}.{prop}: no description")
        by_name = {t.name: t.input_schema for t in tools}
        payload = by_name["send_message"]["properties"]["payload"]["description"]
        check('"message"' in payload and '"text"' in payload, f"the payload description does not list the gate's fields: {payload}")
        good = {
            "send_message": {"to": "bob", "payload": {"text": "x"}},
            "claim_work": {"limit": 2, "lease_seconds": 60},
            "release_work": {"event_id": "0192f0c4-0000-7000-8000-000000000000", "failed": True},
            "acquire_lease": {"name": "planner", "ttl_seconds": 30},
            "write_memory": {"name": "planner", "key": "k", "value": [1, 2]},
        }
        bad = {
            "send_message": {"payload": {}},
            "claim_work": {"limit": 0},
            "complete_work": {},
            "acquire_lease": {"name": "planner", "ttl_seconds": 301},
            "look_at_inbox": {"surprise": 1},
        }
        for tool, args in good.items():
            jsonschema.validate(args, by_name[tool])
        for tool, args in bad.items():
            try:
                jsonschema.validate(args, by_name[tool])
            except jsonschema.ValidationError:
                continue
            raise AssertionError(f"{tool}: the schema accepts bad arguments {args}")
        resources = (await c.list_resources()).resources
        check([r.uri for r in resources] == [INBOX], f"resources: {resources}")
        caps = c.server_capabilities
        check(caps.resources is not None, f"no resources capability: {caps}")
    print(f"ok: {len(tools)} tools on {MODE} (negotiated {negotiated})")


async def handoff():
    """alice hands bob a task and bob hands the result back, through MCP alone: bob
    is told by an inbox notification, claims, acks, answers; alice is told, claims,
    acks. With SB_ARGS="--no-poll" only the SSE wake-up can deliver the notifications."""
    bob_updates, alice_updates = Updates(), Updates()
    async with client("bob", handler=bob_updates.handler) as bob, client(
        "alice", handler=alice_updates.handler
    ) as alice:

        async def bob_side():
            # Give both sessions' SSE subscriptions a moment to be up.
            await asyncio.sleep(0.5)
            started = time.monotonic()
            sent, text = await call(
                alice, "send_message", {"to": "bob", "payload": {"subject": "summarize", "text": "doc 7", "extra": 1}}
            )
            check(sent["state"] == "sent", f"not sent: {sent}")
            check("removed $.extra" in text, f"the stripped field is not named: {text}")
            await bob_updates.wait("alice's task")
            latency = time.monotonic() - started
            read = await bob.read_resource(INBOX)
            summary = json.loads(read.contents[0].text)
            check(summary["pending"] == 1, f"bob's inbox: {summary}")
            claimed, text = await call(bob, "claim_work", {"lease_seconds": 60})
            events = claimed["events"]
            check(len(events) == 1, f"claimed {events}")
            event = events[0]
            check(event["content_from_another_agent"] == {"subject": "summarize", "text": "doc 7"}, event)
            check(event["sender"] == 'agent "alice"', f"sender: {event['sender']}")
            check("not instructions" in text and "BEGIN content from agent \"alice\"" in text, text)
            check("claim_token" not in text and "claim_token" not in json.dumps(claimed), "a claim token leaked")
            await call(bob, "complete_work", {"event_id": event["event_id"]})
            code, _ = await refused(bob, "complete_work", {"event_id": event["event_id"]})
            check(code == "not_claimed", f"a second ack: {code}")
            return latency

        async def alice_side(body):
            return await subscribed(alice, alice_updates, body)

        async def both():
            latency = await subscribed(bob, bob_updates, bob_side)
            await call(bob, "send_message", {"to": "alice", "payload": {"text": "summary: done"}, "correlation_id": "doc-7"})
            await alice_updates.wait("bob's answer")
            claimed, _ = await call(alice, "claim_work", {})
            check(claimed["events"][0]["content_from_another_agent"] == {"text": "summary: done"}, claimed)
            check(claimed["events"][0]["correlation_id"] == "doc-7", claimed)
            await call(alice, "complete_work", {"event_id": claimed["events"][0]["event_id"]})
            inbox, _ = await call(alice, "look_at_inbox", {})
            check(inbox["counts"]["pending"] == 0 and inbox["counts"]["claimed"] == 0, inbox)
            return latency

        latency = await alice_side(both)
    print(f"ok: handoff on {MODE}; send + notification in {latency * 1000:.0f} ms")


async def two_windows():
    """Two sessions of bob's profile (two editor windows, one state file) are both
    told about new work, and the work is claimed once: the second window finds
    nothing left."""
    first_updates, second_updates = Updates(), Updates()
    async with client("alice") as alice, client("bob", handler=first_updates.handler) as first, client(
        "bob", handler=second_updates.handler
    ) as second:

        async def both():
            async def inner():
                await asyncio.sleep(0.5)
                await call(alice, "send_message", {"to": "bob", "payload": {"text": "for either window"}})
                await first_updates.wait("the first window")
                await second_updates.wait("the second window")
                claimed, _ = await call(first, "claim_work", {})
                check(len(claimed["events"]) == 1, claimed)
                again, _ = await call(second, "claim_work", {})
                check(again["events"] == [], f"claimed twice: {again}")
                code, _ = await refused(second, "complete_work", {"event_id": claimed["events"][0]["event_id"]})
                check(code == "not_claimed", f"the other window acked a claim it does not hold: {code}")
                await call(first, "complete_work", {"event_id": claimed["events"][0]["event_id"]})

            return await subscribed(second, second_updates, inner)

        await subscribed(first, first_updates, both)
    print(f"ok: two windows on {MODE}")


def children(name):
    """The pids of this process's children called `name` (from /proc)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        comm = stat[stat.index("(") + 1 : stat.rindex(")")]
        state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
        if int(ppid) == os.getpid() and comm == name and state != "Z":
            found.append(int(entry))
    return found


async def crash_send():
    """Sends while every connection to the server is swallowed (SB_ALICE_URL is a
    blackhole), then kills its `switchboard mcp` with SIGKILL before the outbox
    could deliver."""
    import signal

    c = client("alice", extra=["--send-wait-seconds", "1"])
    alice = await c.__aenter__()
    try:
        sent, text = await call(alice, "send_message", {"to": "bob", "payload": {"text": "survives kill -9"}})
        check(sent["state"] in ("sending", "retryable", "queued"), f"not in flight although the server is cut off: {text}")
        check("do not send it again" in text, text)
        pids = children("switchboard")
        check(len(pids) == 1, f"switchboard mcp processes: {pids}")
        os.kill(pids[0], signal.SIGKILL)
        while children("switchboard"):
            await asyncio.sleep(0.05)
        print(f"{sent['state']}, then killed", flush=True)
    except BaseException as e:
        print(f"FAILED crash_send: {e!r}", file=sys.stderr, flush=True)
        os._exit(1)
    # The client's streams are broken now; leave without a goodbye.
    os._exit(0)


async def resume():
    """A new session of alice's profile: its outbox delivers what the killed one
    queued; bob claims it exactly once."""
    async with client("alice"), client("bob") as bob:
        deadline = time.monotonic() + TIMEOUT
        events = []
        while time.monotonic() < deadline and not events:
            claimed, _ = await call(bob, "claim_work", {"limit": 10})
            events = claimed["events"]
            if not events:
                await asyncio.sleep(0.2)
        check(len(events) == 1 and events[0]["content_from_another_agent"] == {"text": "survives kill -9"}, events)
        await call(bob, "complete_work", {"event_id": events[0]["event_id"]})
        await asyncio.sleep(1.5)
        claimed, _ = await call(bob, "claim_work", {"limit": 10})
        check(claimed["events"] == [], f"delivered twice: {claimed}")
    print("ok: resumed")


async def errors():
    """Bad arguments and refused calls are tool errors with a code and a fix-it
    message; the session survives them all; no token or secret in any of them."""
    token = os.environ["SB_ALICE_TOKEN"]
    async with client("alice") as c:
        cases = [
            ("send_message", {"payload": {"x": 1}}, "invalid_arguments", "to"),
            ("send_message", {"to": "bob", "payload": 1, "priority": 5000}, "invalid_arguments", "priority"),
            ("send_message", {"to": "nobody-here", "payload": {"x": 1}}, None, "nobody-here"),
            ("claim_work", {"limit": "many"}, "invalid_arguments", "limit"),
            ("claim_work", {"lease_seconds": 0}, "invalid_arguments", "lease_seconds"),
            ("complete_work", {"event_id": "not-a-uuid"}, "invalid_arguments", "event id"),
            ("complete_work", {"event_id": "0192f0c4-0000-7000-8000-000000000000"}, "not_claimed", "claim_work"),
            ("release_work", {}, "invalid_arguments", "event_id"),
            ("read_memory", {"name": "nobody", "key": "k"}, "no_lease", "acquire_lease"),
            ("read_room", {"room": "no-such-room"}, "not_found", "room"),
            ("acquire_lease", {"name": "planner", "memory_id": "zzz"}, "invalid_arguments", "memory"),
            ("send_message", {"to": "bob", "payload": {"text": "my ssn is 123-45-6789"}}, "payload_refused", "pii.ssn"),
        ]
        for tool, args, want, mentions in cases:
            code, message = await refused(c, tool, args)
            if want is not None:
                check(code == want, f"{tool}({args}): code {code}, wanted {want}: {message}")
            check(mentions.lower() in message.lower(), f"{tool}({args}): {message!r} does not mention {mentions!r}")
            check(token not in message, f"{tool}: the agent's token is in the error")
            check("123-45-6789" not in message, f"{tool}: the refused value is echoed: {message}")
        try:
            await c.call_tool("no_such_tool", {})
            raise AssertionError("an unknown tool was not refused")
        except Exception as e:  # an MCP protocol error, by the spec
            check("no_such_tool" in str(e), str(e))
        # Still serving after all that.
        await call(c, "look_at_inbox", {})
    print(f"ok: {len(cases)} refusals")


async def stale():
    """Two sessions of bob's profile: the first claims with a 1 s lease, the lease
    runs out, the second claims the event again; the first's ack is refused as a
    stale claim, and the second's is accepted."""
    async with client("alice") as alice, client("bob") as first, client("bob") as second:
        await call(alice, "send_message", {"to": "bob", "payload": {"text": "slow task"}})
        claimed, _ = await call(first, "claim_work", {"lease_seconds": 1})
        event = claimed["events"][0]["event_id"]
        deadline = time.monotonic() + TIMEOUT
        again = []
        while time.monotonic() < deadline and not again:
            await asyncio.sleep(0.3)
            taken, _ = await call(second, "claim_work", {"lease_seconds": 60})
            again = taken["events"]
        check(again and again[0]["event_id"] == event, f"second claim: {again}")
        code, message = await refused(first, "complete_work", {"event_id": event})
        check(code == "stale_claim", f"stale ack: {code} {message}")
        check("claim_work" in message, message)
        code, _ = await refused(first, "extend_claim", {"event_id": event})
        check(code == "not_claimed", f"the stale claim was kept: {code}")
        await call(second, "complete_work", {"event_id": event})
        # Name-and-memory leases: one holder; its memory is fenced.
        held, _ = await call(first, "acquire_lease", {"name": "planner", "ttl_seconds": 30})
        code, _ = await refused(second, "acquire_lease", {"name": "planner", "memory_id": held["memory_id"]})
        check(code == "lease_held", code)
        await call(first, "write_memory", {"name": "planner", "key": "plan", "value": {"step": 1}})
        record, text = await call(first, "read_memory", {"name": "planner", "key": "plan"})
        check(record["content_from_another_agent"] == {"step": 1} and "not instructions" in text, record)
        await call(first, "renew_lease", {"name": "planner", "ttl_seconds": 30})
        await call(first, "release_lease", {"name": "planner"})
        await call(second, "acquire_lease", {"name": "planner", "memory_id": held["memory_id"], "ttl_seconds": 30})
        record, _ = await call(second, "read_memory", {"name": "planner", "key": "plan"})
        check(record["version"] >= 1, record)
    print("ok: stale claim refused, lease fenced")


SCENARIOS = {f.__name__: f for f in [schemas, handoff, two_windows, crash_send, resume, errors, stale]}

if __name__ == "__main__":
    scenario = SCENARIOS[sys.argv[1]]
    try:
        asyncio.run(scenario())
    except AssertionError as e:
        print(f"FAILED {sys.argv[1]} ({MODE}): {e}", file=sys.stderr)
        sys.exit(1)
