"""A real ``switchboard serve`` for the package's tests (SQLite in a temp dir; the
outbox's tests also on PostgreSQL when ``$SWITCHBOARD_TEST_POSTGRES`` is set), and
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
import urllib.parse
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pytest

REPO = Path(__file__).resolve().parents[3]

# The first line of a child script that a test interrupts with SIGINT. A process
# started from a shell's background job (`cmd &` without job control, as a CI
# runner or `nohup` may start the suite) inherits SIGINT ignored, and Python then
# installs no KeyboardInterrupt handler: the child would never see the Ctrl-C.
CTRL_C = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"


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


def serve(home: Path, database_url: str, *extra: str) -> Iterator[Server]:
    """``switchboard serve`` on ``database_url``, port 0, with the ``extra``
    arguments, until the caller is done."""
    binary = server_binary()
    assert binary.exists(), (
        f"no server binary at {binary}: build it with `cargo build -p switchboard-cli` "
        "or set SWITCHBOARD_BIN"
    )
    process = subprocess.Popen(
        [
            str(binary),
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--worker-interval-ms",
            "100",
            "--database-url",
            database_url,
            "--operator-token-file",
            str(home / "operator-token"),
            "--sqlite-synchronous",
            "normal",
            *extra,
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


@pytest.fixture(scope="session")
def sqlite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the session, on SQLite in a temp dir."""
    home = tmp_path_factory.mktemp("server")
    yield from serve(home, f"sqlite://{home / 'server.db'}")


POSTGRES_ENV = "SWITCHBOARD_TEST_POSTGRES"


def psql(admin_url: str, sql: str) -> None:
    subprocess.run(
        ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", admin_url, "-c", sql],
        check=True,
        capture_output=True,
    )


@pytest.fixture(scope="session")
def postgres_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One server for the session on a fresh PostgreSQL database ``sb_t_py_…``, made
    through ``$SWITCHBOARD_TEST_POSTGRES`` (an admin URL, as for the Rust suites;
    ``cargo xtask test`` sets it). Skipped without it."""
    admin = os.environ.get(POSTGRES_ENV)
    if not admin:
        pytest.skip(f"set {POSTGRES_ENV} to an admin URL to run this on PostgreSQL")
    name = f"sb_t_py_{uuid.uuid4().hex}"
    # As the Rust suites' databases: a crash of the machine is not under test.
    psql(admin, f"CREATE DATABASE {name}")
    psql(admin, f"ALTER DATABASE {name} SET synchronous_commit = off")
    url = urllib.parse.urlsplit(admin)._replace(path=f"/{name}").geturl()
    try:
        yield from serve(tmp_path_factory.mktemp("pg-server"), url)
    finally:
        psql(admin, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def server(sqlite_server: Server) -> Server:
    """The server most tests use (SQLite); the outbox's tests override it with
    ``each_backend``."""
    return sqlite_server


BACKENDS = ["sqlite", "postgres"]


def each_backend(request: pytest.FixtureRequest) -> Server:
    """For a module's ``server`` fixture parametrized over ``BACKENDS``: its
    tests run on SQLite and on PostgreSQL."""
    return request.getfixturevalue(f"{request.param}_server")


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
