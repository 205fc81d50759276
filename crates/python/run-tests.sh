#!/bin/sh
# The Python package's tests: build the server binary, install the package into a
# fresh virtual environment with pip (as a user would), run pytest against real
# servers. Run from anywhere; honours CARGO_TARGET_DIR. Extra arguments go to pytest.
set -eu
repo=$(cd "$(dirname "$0")/../.." && pwd)
target=${CARGO_TARGET_DIR:-$repo/target}
venv=$(mktemp -d "${TMPDIR:-/tmp}/switchboard-py.XXXXXX")
trap 'rm -rf "$venv"' EXIT
cd "$repo"
cargo build -p switchboard-cli
python3 -m venv "$venv"
"$venv/bin/pip" install --quiet ./crates/python pytest
SWITCHBOARD_BIN=${SWITCHBOARD_BIN:-$target/debug/switchboard} \
    "$venv/bin/pytest" crates/python/tests "$@"
