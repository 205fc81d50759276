"""An independent verifier of Switchboard access tokens (tests/tests/api/oauth.rs).

Reads {"token", "issuer", "jwks_uri"} as JSON on stdin, fetches the JWKS with
PyJWT's client, verifies the token's EdDSA signature, issuer, audience and times,
and prints its claims as JSON. Exits non-zero, with the reason, when it does not
verify.
"""

import json
import sys

import jwt

request = json.load(sys.stdin)
client = jwt.PyJWKClient(request["jwks_uri"], cache_keys=False)
key = client.get_signing_key_from_jwt(request["token"])
claims = jwt.decode(
    request["token"],
    key,
    algorithms=["EdDSA"],
    audience=request["issuer"],
    issuer=request["issuer"],
    options={"require": ["exp", "iat", "iss", "aud", "sub", "jti"]},
)
print(json.dumps({"claims": claims, "kid": key.key_id}))
