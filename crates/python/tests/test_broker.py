"""Python sidecars on the local token broker (``switchboard agent broker``): the
broker holds the host's login (here a static agent token from the environment)
and gives this interpreter, which its policy lists, short-lived tokens bound to a
key made in memory. Refusals: another user (a client run as ``nobody`` with
setpriv), an unlisted executable, an unknown agent, a scope over the cap, a
revoked host. A sidecar renews through the broker without losing an event."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import pytest
import switchboard
from conftest import Server, serve, server_binary

# What the broker sees as this process's executable (a venv's python is a link).
PYTHON = os.path.realpath(sys.executable)


@dataclass
class Broker:
    socket: Path
    base: Path
    log: Path
    process: subprocess.Popen[bytes]

    def log_text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""


def policy(*entries: tuple[str, str, list[str] | None]) -> str:
    text = ""
    for agent, exe, scopes in entries:
        text += f"[[allow]]\nagent = {json.dumps(agent)}\nexecutables = [{json.dumps(exe)}]\n"
        if scopes is not None:
            text += f"scopes = {json.dumps(scopes)}\n"
    return text


@pytest.fixture
def start_broker() -> Iterator:
    """Starts brokers (``start(server, host_token, policy)``) in private dirs under
    /tmp; stops them and removes the dirs after the test."""
    started: list[Broker] = []

    def start(server: Server, token: str, text: str) -> Broker:
        base = Path(tempfile.mkdtemp(prefix="sb-broker-"))
        (base / "broker.toml").write_text(text)
        log = base / "broker.log"
        with open(log, "w") as errors:
            process = subprocess.Popen(
                [
                    str(server_binary()),
                    "agent",
                    "broker",
                    "--socket",
                    str(base / "run" / "broker.sock"),
                    "--policy",
                    str(base / "broker.toml"),
                ],
                stdout=subprocess.PIPE,
                stderr=errors,
                env={
                    **os.environ,
                    "SWITCHBOARD_SERVER": server.url,
                    "SWITCHBOARD_TOKEN": token,
                    "SWITCHBOARD_STATE": str(base / "host.db"),
                    "XDG_CONFIG_HOME": str(base / "config"),
                    "SWITCHBOARD_LOG": "info",
                },
            )
        assert process.stdout is not None
        line = process.stdout.readline()
        broker = Broker(socket=base / "run" / "broker.sock", base=base, log=log, process=process)
        started.append(broker)
        assert line, f"the broker did not start: {broker.log_text()}"
        assert json.loads(line)["ready"] is True
        return broker

    yield start
    for broker in started:
        broker.process.kill()
        broker.process.wait()
        shutil.rmtree(broker.base, ignore_errors=True)


@pytest.fixture(scope="module")
def short_lived(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server whose access tokens live 60 s, the least it allows: a sidecar
    renews after 30 s."""
    home = tmp_path_factory.mktemp("short-lived")
    yield from serve(
        home, f"sqlite://{home / 'server.db'}", "--access-token-ttl-seconds", "60"
    )


def send_as(server: Server, token: str, state: Path, to: str, texts: list[str]) -> None:
    with switchboard.Agent(server=server.url, token=token, state=state) as agent:
        for text in texts:
            agent.send(to, {"text": text})
        agent.flush(timeout=10)


def test_a_sidecar_renews_through_the_broker_without_losing_an_event(
    short_lived: Server, names, tmp_path: Path, start_broker
) -> None:
    host, peer = next(names), next(names)
    host_token, peer_token = short_lived.create_agent(host), short_lived.create_agent(peer)
    broker = start_broker(short_lived, host_token, policy((host, PYTHON, None)))
    handled: list[str] = []
    started = time.monotonic()
    with switchboard.Agent.from_broker(
        agent=host, state=tmp_path / "sidecar", socket=broker.socket
    ) as sidecar:
        assert sidecar.name == host
        for round, texts in enumerate([["a1", "a2", "a3"], ["b1", "b2", "b3"]]):
            if round == 1:
                # Past half of the first token's life: the next call renews.
                time.sleep(max(0.0, 32 - (time.monotonic() - started)))
            send_as(short_lived, peer_token, tmp_path / f"peer{round}", host, texts)
            for text in texts:
                sidecar.send(peer, {"text": f"re {text}"})
            stats = sidecar.run(lambda event: handled.append(event.payload["text"]))
            assert stats.handled == 3, stats
            sidecar.flush(timeout=10)
    assert handled == ["a1", "a2", "a3", "b1", "b2", "b3"]
    replies = [e["payload"]["text"] for e in short_lived.inbox(peer, peer_token)]
    assert replies == [f"re {t}" for t in handled], "each reply once, in order"
    grants = [l for l in broker.log_text().splitlines() if "token granted" in l]
    assert len(grants) >= 2, f"no renewal through the broker:\n{broker.log_text()}"
    assert all(f"agent={host}" in l or f'agent="{host}"' in l for l in grants), grants
    assert host_token not in broker.log_text() and "eyJ" not in broker.log_text()


def test_an_unlisted_executable_an_unknown_agent_and_a_wider_scope_are_refused(
    server: Server, names, tmp_path: Path, start_broker
) -> None:
    host, other = next(names), next(names)
    token = server.create_agent(host)
    broker = start_broker(
        server,
        token,
        policy((host, PYTHON, ["messages:send"]), (other, os.path.realpath("/bin/true"), None)),
    )
    cases = [
        (dict(agent=other), 403, "executable_not_allowed"),
        (dict(agent="nobody-listed"), 403, "agent_not_allowed"),
        (dict(agent=host, scope="agent:{agent_id}:inbox"), 403, "scope_not_allowed"),
    ]
    for kwargs, status, code in cases:
        with pytest.raises(switchboard.ApiError) as refused:
            switchboard.Agent.from_broker(state=tmp_path / "s", socket=broker.socket, **kwargs)
        assert (refused.value.status, refused.value.code) == (status, code), refused.value
        assert refused.value.detail
    assert PYTHON in broker.log_text() and "executable_not_allowed" in broker.log_text()
    # Within the cap it is granted.
    switchboard.Agent.from_broker(
        agent=host, state=tmp_path / "ok", socket=broker.socket, scope="messages:send"
    ).close()


def test_no_broker_says_how_to_start_one(tmp_path: Path) -> None:
    with pytest.raises(switchboard.ApiError) as refused:
        switchboard.Agent.from_broker(
            agent="a", state=tmp_path, socket=tmp_path / "none.sock"
        )
    assert refused.value.kind == "login"
    assert "switchboard agent broker" in str(refused.value)


# A client of the protocol that needs nothing but the standard library (it runs
# as another user, who may not read the virtual environment).
RAW_CLIENT = """
import json, socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
body = json.dumps({"agent": sys.argv[2]}).encode()
s.sendall(b"POST /v1/token HTTP/1.1\\r\\nHost: broker\\r\\nContent-Type: application/json\\r\\n"
          b"Connection: close\\r\\nContent-Length: %d\\r\\n\\r\\n" % len(body) + body)
data = b""
while chunk := s.recv(65536):
    data += chunk
head, _, rest = data.partition(b"\\r\\n\\r\\n")
print(json.dumps({"status": int(head.split()[1]), "body": json.loads(rest)}))
"""


@pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("setpriv") is None,
    reason="runs a client as nobody: needs root and setpriv (util-linux)",
)
def test_another_user_is_refused_even_when_the_socket_is_reachable(
    server: Server, names, start_broker
) -> None:
    host = next(names)
    broker = start_broker(server, server.create_agent(host), policy((host, PYTHON, None)))
    # Open the private directory and the socket to everyone: exactly the
    # misconfiguration the peer's uid (SO_PEERCRED) guards against.
    os.chmod(broker.base, 0o711)
    os.chmod(broker.socket.parent, 0o711)
    os.chmod(broker.socket, 0o666)
    as_nobody = [
        "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
        PYTHON, "-I", "-c", RAW_CLIENT, str(broker.socket), host,
    ]  # fmt: skip
    done = subprocess.run(as_nobody, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["status"] == 403, answer
    assert answer["body"]["code"] == "peer_refused", answer
    assert "access_token" not in answer["body"]
    assert "uid=65534" in broker.log_text() and "peer_refused" in broker.log_text()
    # The same client as this user gets a token: the refusal was the uid's.
    done = subprocess.run(
        [PYTHON, "-I", "-c", RAW_CLIENT, str(broker.socket), host],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert json.loads(done.stdout)["status"] == 200, done.stdout


def test_a_revoked_host_ends_the_sidecars_tokens_and_its_messages_wait(
    server: Server, names, tmp_path: Path, start_broker
) -> None:
    host, peer = next(names), next(names)
    token = server.create_agent(host)
    server.create_agent(peer)
    broker = start_broker(server, token, policy((host, PYTHON, None)))
    with switchboard.Agent.from_broker(
        agent=host, state=tmp_path / "sidecar", socket=broker.socket
    ) as sidecar:
        sidecar.send(peer, {"text": "before"})
        sidecar.flush(timeout=10)
        status, _ = server.call("POST", f"/api/v1/ops/agents/{host}/revoke", server.operator)
        assert status == 200
        # The token the sidecar holds is refused by the server now; its renewal
        # is refused by the broker; the message waits for a new login.
        sidecar.send(peer, {"text": "after"})
        with pytest.raises(switchboard.FlushTimeout) as waiting:
            sidecar.flush(timeout=2)
        assert "host_login_ended" in str(waiting.value), waiting.value
        assert sidecar.pending() == 1
    with pytest.raises(switchboard.ApiError) as refused:
        switchboard.Agent.from_broker(agent=host, state=tmp_path / "new", socket=broker.socket)
    assert (refused.value.status, refused.value.code) == (401, "host_login_ended")
    assert "log in again" in (refused.value.detail or "")


def test_async_agent_from_broker(server: Server, names, tmp_path: Path, start_broker) -> None:
    host, peer = next(names), next(names)
    token, peer_token = server.create_agent(host), server.create_agent(peer)
    broker = start_broker(server, token, policy((host, PYTHON, None)))
    send_as(server, peer_token, tmp_path / "peer", host, ["one", "two"])

    async def main() -> list[str]:
        seen: list[str] = []
        async with switchboard.AsyncAgent.from_broker(
            agent=host, state=tmp_path / "sidecar", socket=broker.socket
        ) as agent:
            async for event in agent.events(stop_when_idle=True):
                seen.append(event.payload["text"])
                await event.ack()
            await agent.send(peer, {"text": "thanks"})
            await agent.flush(timeout=10)
        return seen

    assert asyncio.run(main()) == ["one", "two"]
    assert [e["payload"]["text"] for e in server.inbox(peer, peer_token)] == ["thanks"]
