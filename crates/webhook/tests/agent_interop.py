#!/usr/bin/env python3
"""Cross-check Switchboard's agent request signatures (RFC 9421, alg "ed25519")
with an independent implementation: PyPI `http-message-signatures` and its
ED25519 algorithm (keys through `cryptography`).

Driven by crates/webhook/tests/agent_interop.rs. Two modes, each reading JSON on
stdin; a request is {"method", "url", "headers": [[name, value], ...], "body"}.

    agent_interop.py verify   {request..., "jwk": {kty, crv, x}, "keyid", "require": [...]}
        Verifies the request's signature with the library, the public key in
        `jwk` and the components in `require`, and checks Content-Digest against
        the body. As a control, the same request with one byte of the body
        changed must be refused. Exit status 0 only if both hold.

    agent_interop.py sign     {request..., "created", "nonce", "components": [...]}
        Makes a new Ed25519 key and signs the request with the library: label
        sig1, the given components, created, expires = created + 300, the nonce,
        keyid = the key's RFC 7638 thumbprint (computed here) and alg. Prints
        {"jwk": {...}, "keyid": "...", "headers": [[name, value], ...]}.

Setup for a local run:
    python3 -m pip install --target /tmp/pyverify-h http-message-signatures==3.0.0
    SWITCHBOARD_TEST_PYVERIFY=/tmp/pyverify-h cargo test -p switchboard-webhook --test agent_interop
"""

import base64
import datetime
import hashlib
import json
import sys

from cryptography.hazmat.primitives.asymmetric import ed25519
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from http_message_signatures import (
    HTTPMessageSigner,
    HTTPMessageVerifier,
    HTTPSignatureKeyResolver,
    algorithms,
)


class Request:
    """The message shape http-message-signatures reads: method, url, headers."""

    def __init__(self, method, url, headers):
        self.method = method
        self.url = url
        # A plain dict: every header here has one line, and the signer writes
        # Content-Digest, Signature-Input and Signature into it.
        self.headers = dict(headers)


class Keys(HTTPSignatureKeyResolver):
    def __init__(self, keyid, public=None, private=None):
        self.keyid, self.public, self.private = keyid, public, private

    def resolve_public_key(self, key_id):
        return self.public if key_id == self.keyid else None

    def resolve_private_key(self, key_id):
        if key_id != self.keyid:
            raise KeyError(key_id)
        return self.private


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def thumbprint(x):
    """RFC 7638 SHA-256 thumbprint of an Ed25519 JWK (RFC 8037 appendix A.3)."""
    canonical = json.dumps({"crv": "Ed25519", "kty": "OKP", "x": x}, separators=(",", ":"), sort_keys=True)
    return b64url(hashlib.sha256(canonical.encode()).digest())


def verify(request):
    jwk = request["jwk"]
    if jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519" or "d" in jwk:
        raise SystemExit(f"not a public Ed25519 JWK: {sorted(jwk)}")
    public = ed25519.Ed25519PublicKey.from_public_bytes(unb64url(jwk["x"]))
    verifier = HTTPMessageVerifier(
        signature_algorithm=algorithms.ED25519,
        key_resolver=Keys(request["keyid"], public=public),
    )
    body = request["body"].encode()

    def attempt(body):
        try:
            results = verifier.verify(
                Request(request["method"], request["url"], request["headers"]),
                require_components=request["require"],
                body=body,
            )
        except Exception as error:
            return False, f"{type(error).__name__}: {error}"
        result = results[0]
        if body and result.body is None:
            return False, "signature verified but Content-Digest was not checked"
        lines = "\n    ".join(f"{k}: {v}" for k, v in result.covered_components.items())
        return True, f"accepted (label {result.label}, nonce {result.nonce}); signature base:\n    {lines}"

    tampered = body[:-1] + bytes([body[-1] ^ 1]) if body else b"x"
    ok = True
    for name, (accepted, detail), want in [
        ("our signature", attempt(body), True),
        ("our signature, tampered body", attempt(tampered), False),
    ]:
        good = accepted == want
        ok &= good
        print(f"[{'ok' if good else 'FAIL'}] {name}: {detail}")
    sys.exit(0 if ok else 1)


def sign(request):
    private = ed25519.Ed25519PrivateKey.generate()
    x = b64url(private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))
    keyid = thumbprint(x)
    message = Request(request["method"], request["url"], request["headers"])
    created = datetime.datetime.fromtimestamp(request["created"], tz=datetime.timezone.utc)
    body = request["body"].encode()
    HTTPMessageSigner(signature_algorithm=algorithms.ED25519, key_resolver=Keys(keyid, private=private)).sign(
        message,
        key_id=keyid,
        created=created,
        expires=created + datetime.timedelta(seconds=300),
        nonce=request["nonce"],
        label="sig1",
        covered_component_ids=request["components"],
        body=body if body else None,
    )
    print(json.dumps({
        "jwk": {"kty": "OKP", "crv": "Ed25519", "x": x},
        "keyid": keyid,
        "headers": list(message.headers.items()),
    }))


if __name__ == "__main__":
    mode = sys.argv[1] if len(sys.argv) > 1 else ""
    if mode not in ("verify", "sign"):
        raise SystemExit("usage: agent_interop.py verify|sign < request.json")
    (verify if mode == "verify" else sign)(json.load(sys.stdin))
