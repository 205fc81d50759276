"""The privacy gate refuses before anything is stored or leaves the machine, with
the vectors of the Rust gate's own tests (``every_secret_kind_in_a_payload_blocks``
in crates/sdk/src/privacy/tests.rs, ``fake_jwt``/``fake_pem`` in
credentials/tests.rs, the schema refusals of
``unknown_message_types_and_non_objects_are_refused`` and ``wrong_types_…``)."""

from __future__ import annotations

import base64
import socket
from pathlib import Path
from typing import Iterator

import pytest

import switchboard
from conftest import Server


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


AWS_KEY_ID = "AKIAIOSFODNN7EXAMPLE"
# fake_jwt() in credentials/tests.rs: a signed-looking JWT built from its parts.
JWT = ".".join(
    [
        b64url(b'{"alg":"HS256","typ":"JWT"}'),
        b64url(b'{"sub":"agent-7","exp":1893456000}'),
        b64url(bytes([0x5A] * 32)),
    ]
)
# fake_pem() in credentials/tests.rs.
PEM = "-----BEGIN RSA {k}-----\n{b}\n-----END RSA {k}-----".format(
    k="PRIVATE KEY", b="MIIEowIBAAKCAQEAnotARealKeyJustJunkForTests0123456789abcdefABCDEF"
)
ENTROPY = "q8Zk3vN0pX7mWc2RtY5uHb9LdE4sFgJ1aKoIiQeTzVn"

# (payload, a rule the refusal must name, the secret that must not be echoed)
VECTORS = [
    ({"text": f"key {AWS_KEY_ID} here"}, "credential.aws_access_key_id", AWS_KEY_ID),
    ({"text": f"use {JWT}"}, "credential.jwt", JWT),
    ({"text": "ok", "tags": ["fine", PEM]}, "credential.private_key", PEM),
    ({"subject": "x", "text": "ssn 078-05-1120"}, "pii.ssn", "078-05-1120"),
    ({"text": "card 4111 1111 1111 1111"}, "pii.payment_card", "4111 1111 1111 1111"),
    ({"text": "mail ops@example.com"}, "pii.email", "ops@example.com"),
    ({"text": ENTROPY}, "credential.high_entropy", ENTROPY),
    (["text"], "schema.not_an_object", None),
    ({"text": 7}, "schema.wrong_type", None),
]


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    """A TCP listener standing in for the server: it records whether anyone
    connects (nothing should)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(8)
    s.settimeout(0.3)
    yield s
    s.close()


def assert_no_connection(listener: socket.socket) -> None:
    with pytest.raises(TimeoutError):
        conn, _ = listener.accept()
        conn.close()


@pytest.mark.parametrize("payload,rule,secret", VECTORS, ids=[v[1] for v in VECTORS])
def test_check_and_send_refuse_before_any_network_io(
    listener: socket.socket, tmp_path: Path, payload, rule, secret
) -> None:
    url = "http://127.0.0.1:%d" % listener.getsockname()[1]
    with switchboard.Agent(server=url, token="t", state=tmp_path) as agent:
        with pytest.raises(switchboard.PrivacyRefused) as checked:
            agent.check(payload)
        with pytest.raises(switchboard.PrivacyRefused) as sent:
            agent.send("bob", payload)
        with pytest.raises(switchboard.PrivacyRefused):
            agent.post("room", payload)
        assert agent.pending() == 0, "a refused payload is never stored"
        agent.flush(timeout=0.2)
    for refused in (checked.value, sent.value):
        assert rule in refused.rules, refused.rules
        assert refused.message_type == "message"
        assert refused.refusals, "it says why"
        if secret is not None:
            for text in [str(refused), repr(refused), *refused.refusals]:
                assert secret not in text, "refusals never hold the data"
    assert_no_connection(listener)


def test_unknown_message_types_are_refused(listener: socket.socket, tmp_path: Path) -> None:
    url = "http://127.0.0.1:%d" % listener.getsockname()[1]
    with switchboard.Agent(server=url, token="t", state=tmp_path) as agent:
        with pytest.raises(switchboard.PrivacyRefused) as refused:
            agent.send("bob", {"text": "hi"}, message_type="note")
        assert refused.value.rules == ["schema.unknown_message_type"]
        assert agent.check({"text": "hi", "extra": 1}) == {"text": "hi"}, "check strips too"
    assert_no_connection(listener)


def test_the_server_sees_only_what_the_gate_let_through(
    server: Server, names, tmp_path: Path
) -> None:
    alice, bob = next(names), next(names)
    alice_token, bob_token = server.create_agent(alice), server.create_agent(bob)
    with switchboard.Agent(server=server.url, token=alice_token, state=tmp_path) as agent:
        for payload, _, _ in VECTORS:
            with pytest.raises(switchboard.PrivacyRefused):
                agent.send(bob, payload)
        agent.send(bob, {"text": "clean"})
        agent.flush(timeout=10)
    assert [e["payload"] for e in server.inbox(bob, bob_token)] == [{"text": "clean"}]
