#!/usr/bin/env python3
"""The "system browser" of the desktop's remote sign-in smoke test (xtask's
isolated.rs sets BROWSER to this file): it plays the operator who allows the
sign-in. Like a browser it returns at once; a child process loads the
authorization page, allows the request with the operator token (the console's
consent call) and follows the answer to the app's loopback address."""

import json
import os
import sys
import urllib.parse
import urllib.request

url = sys.argv[1]
if os.fork() != 0:
    sys.exit(0)
log = open(os.environ["SWITCHBOARD_SMOKE_BROWSER_LOG"], "a")
try:
    # The authorization endpoint serves the console's consent page.
    with urllib.request.urlopen(url, timeout=30) as page:
        assert page.status == 200, page.status
    server = url.split("/oauth/authorize", 1)[0]
    query = urllib.parse.urlsplit(url).query
    token = open(os.environ["SWITCHBOARD_SMOKE_TOKEN_FILE"]).read().strip()
    consent = urllib.request.Request(
        server + "/api/v1/ops/authorizations",
        data=json.dumps({"request": query, "allow": True}).encode(),
        headers={"authorization": "Bearer " + token, "content-type": "application/json"},
    )
    with urllib.request.urlopen(consent, timeout=30) as answer:
        redirect_to = json.load(answer)["redirect_to"]
    with urllib.request.urlopen(redirect_to, timeout=30) as landed:
        print("browser: the app answered", landed.status, file=log)
except Exception as error:  # noqa: BLE001 - the log says what went wrong
    print("browser: FAILED:", repr(error), file=log)
    sys.exit(1)
