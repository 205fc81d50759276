"""A real ``switchboard serve`` (SQLite in a temp dir) for the package's tests, and
plain-HTTP helpers (urllib) that look at the server's side without the SDK.

The server binary is ``$SWITCHBOARD_BIN``, else ``target/debug/switchboard`` under
``$CARGO_TARGET_DIR`` or the repository's ``target/``. Build it with
``cargo build -p switchboard-cli``. The tests fail (they do not skip) without it.
"""

from __future__ import annotations

import itertools
import json
import os
import socket
import subprocess
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

REPO = Path(__file__).resolve().parents[3]


def server_binary() -> Path:
    if os.environ.get("SWITCHBOARD_BIN"):
        return Path(os.environ["SWITCHBOARD_BIN"])
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO / "target"))
    return target / "debug" / "switchboard"


@dataclass
class Server:
    url: str
    operator: str
    process: subprocess.Popen[bytes]

    def call(self, method: str, path: str, token: str, body: Any = None) -> tuple[int, Any]:
        """One HTTP request; (status, decoded JSON body or None)."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.url + path, data=data, method=method)
        request.add_header("Authorization", f"Bearer {token}")
        if data is not None:
            request.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as error:
            raw = error.read()
            return error.code, json.loads(raw) if raw else None

    def create_agent(self, name: str) -> str:
        """Creates agent ``name``; its token."""
        status, body = self.call("POST", "/api/v1/ops/agents", self.operator, {"name": name})
        assert status == 201 or status == 200, (status, body)
        return body["token"]

    def inbox(self, name: str, token: str) -> list[dict[str, Any]]:
        """Every event in ``name``'s inbox (read-only poll, from the start)."""
        events: list[dict[str, Any]] = []
        cursor = 0
        while True:
            status, page = self.call(
                "GET", f"/api/v1/agents/{name}/inbox?after_cursor={cursor}&limit=100", token
            )
            assert status == 200, (status, page)
            events += page["events"]
            if not page["has_more"]:
                return events
            cursor = page["next_cursor"]

    def event(self, event_id: str) -> dict[str, Any]:
        """An event as operators see it (status, attempts, last_error)."""
        status, body = self.call("GET", f"/api/v1/ops/events/{event_id}", self.operator)
        assert status == 200, (status, body)
        return body


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    binary = server_binary()
    assert binary.exists(), (
        f"no server binary at {binary}: build it with `cargo build -p switchboard-cli` "
        "or set SWITCHBOARD_BIN"
    )
    home = tmp_path_factory.mktemp("server")
    process = subprocess.Popen(
        [
            str(binary),
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--worker-interval-ms",
            "100",
            "--database-url",
            f"sqlite://{home / 'server.db'}",
            "--operator-token-file",
            str(home / "operator-token"),
            "--sqlite-synchronous",
            "normal",
        ],
        stdout=subprocess.PIPE,
        env={**os.environ, "SWITCHBOARD_LOG": "warn", "HOME": str(home)},
    )
    assert process.stdout is not None
    ready = json.loads(process.stdout.readline())
    assert ready["ready"] is True, ready
    operator = (home / "operator-token").read_text().strip()
    try:
        yield Server(url=ready["url"], operator=operator, process=process)
    finally:
        process.kill()
        process.wait()


_names = itertools.count()


@pytest.fixture
def names(request: pytest.FixtureRequest) -> Iterator[str]:
    """Agent names unique to this test (agents live for the whole session)."""
    base = "".join(c if c.isalnum() else "-" for c in request.node.name)[:40]
    return (f"{base}-{i}-{next(_names)}" for i in itertools.count())


def closed_port_url() -> str:
    """A URL on which nothing listens (the port was free a moment ago)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"
