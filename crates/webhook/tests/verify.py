#!/usr/bin/env python3
"""Verify one signed Switchboard webhook request with independent Python libraries.

Standard Webhooks v1 with PyPI `standardwebhooks`, and RFC 9421 (hmac-sha256) plus
the RFC 9530 Content-Digest with PyPI `http-message-signatures`.

Reads JSON on stdin:
    {"secret": "whsec_...", "headers": {"name": "value", ...} or [["name", "value"], ...],
     "body": "<UTF-8 text>", "method": "POST", "url": "https://host[:port]/path?query",
     "keyid": "<expected keyid>"}            (keyid optional: any keyid is then accepted)

Setup and use (not wired into any test harness):
    python3 -m pip install --target /tmp/pyverify standardwebhooks http-message-signatures
    cargo run -q -p switchboard-webhook --example signed_request \\
        | PYTHONPATH=/tmp/pyverify python3 crates/webhook/tests/verify.py

Both libraries read the system clock, so the request must have been signed just
now. As a control, each verifier is also given the request with one byte of the
body changed and must refuse it. Exit status 0 only if both accept the request
and both refuse the tampered one. The secret is never printed.
"""

import base64
import json
import sys
from importlib.metadata import version

import standardwebhooks
from http_message_signatures import (
    HTTPMessageVerifier,
    HTTPSignatureKeyResolver,
    algorithms,
)

REQUIRED_COMPONENTS = (
    "@method",
    "@authority",
    "@path",
    "content-digest",
    "webhook-id",
    "webhook-timestamp",
)


class Request:
    """The message shape http-message-signatures reads: method, url, headers.items()."""

    def __init__(self, method, url, headers):
        self.method = method
        self.url = url
        self.headers = Headers(headers)


class Headers:
    def __init__(self, pairs):
        self.pairs = list(pairs)

    def items(self):
        return list(self.pairs)

    def __iter__(self):
        return iter(dict.fromkeys(name for name, _ in self.pairs))

    def __contains__(self, name):
        return any(n.lower() == name.lower() for n, _ in self.pairs)


class SecretResolver(HTTPSignatureKeyResolver):
    def __init__(self, key, keyid):
        self.key = key
        self.keyid = keyid
        self.seen = []

    def resolve_public_key(self, key_id):
        self.seen.append(key_id)
        if self.keyid is not None and key_id != self.keyid:
            return None
        return self.key

    def resolve_private_key(self, key_id):
        raise KeyError(key_id)


def secret_key(whsec):
    if not whsec.startswith("whsec_"):
        raise SystemExit("secret must start with whsec_")
    return base64.b64decode(whsec[len("whsec_"):], validate=True)


def verify_standard(whsec, headers, body):
    try:
        standardwebhooks.Webhook(whsec).verify(body, dict(headers))
        return True, "accepted"
    except Exception as error:  # the library also raises binascii.Error
        return False, f"{type(error).__name__}: {error}"


def verify_rfc9421(key, keyid, method, url, headers, body):
    resolver = SecretResolver(key, keyid)
    verifier = HTTPMessageVerifier(signature_algorithm=algorithms.HMAC_SHA256, key_resolver=resolver)
    try:
        results = verifier.verify(
            Request(method, url, headers),
            require_components=REQUIRED_COMPONENTS,
            body=body,
        )
    except Exception as error:
        return False, f"{type(error).__name__}: {error}"
    result = results[0]
    if result.body is None:
        return False, "signature verified but Content-Digest was not checked"
    lines = "\n    ".join(f"{k}: {v}" for k, v in result.covered_components.items())
    return True, f"accepted (label {result.label}, keyid {resolver.seen}); signature base:\n    {lines}"


def main():
    request = json.load(sys.stdin)
    headers = request["headers"]
    headers = list(headers.items()) if isinstance(headers, dict) else [tuple(h) for h in headers]
    body = request["body"].encode()
    method, url, keyid = request["method"], request["url"], request.get("keyid")
    whsec = request["secret"]
    key = secret_key(whsec)
    tampered = body[:-1] + bytes([body[-1] ^ 1])

    print(f"standardwebhooks {version('standardwebhooks')}, "
          f"http-message-signatures {version('http-message-signatures')}, "
          f"http-sf {version('http-sf')}, cryptography {version('cryptography')}")
    print(f"{method} {url}")
    checks = [
        ("Standard Webhooks", verify_standard(whsec, headers, body), True),
        ("Standard Webhooks, tampered body", verify_standard(whsec, headers, tampered), False),
        ("RFC 9421 + Content-Digest", verify_rfc9421(key, keyid, method, url, headers, body), True),
        ("RFC 9421 + Content-Digest, tampered body",
         verify_rfc9421(key, keyid, method, url, headers, tampered), False),
    ]
    ok = True
    for name, (accepted, detail), want in checks:
        good = accepted == want
        ok &= good
        print(f"[{'ok' if good else 'FAIL'}] {name}: {detail}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
