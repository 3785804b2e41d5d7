#!/usr/bin/env bash
# Runs the suite as an unprivileged user, the way people run stockade. Needs root
# to create the user; the tree is copied where that user can read it, and the
# package is installed non-editable (`pip install .`) from Debian's python3.
# STOCKADE_UNPRIVILEGED_PHASE: prepare (user, copy, venv), run (the tests), or all.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
TEST_USER=${STOCKADE_TEST_USER:-stockade-test}
WORK=${STOCKADE_UNPRIVILEGED_WORK:-/var/tmp/stockade-unprivileged}
PHASE=${STOCKADE_UNPRIVILEGED_PHASE:-all}

if [ "$PHASE" != run ]; then
    id -u "$TEST_USER" >/dev/null 2>&1 || useradd --create-home --shell /bin/bash $(getent group "$TEST_USER" >/dev/null && echo --gid "$TEST_USER") "$TEST_USER"
    rm -rf "$WORK"
    mkdir -p "$WORK"
    tar -C "$ROOT" --exclude=.venv --exclude=.git --exclude='*.egg-info' --exclude=__pycache__ --exclude=./tests/projects/.cache --exclude=./tests/agents/.cache -cf - . | tar -C "$WORK" -xf -
    mkdir -p "$WORK/venv-cache"
    /usr/bin/python3 -m venv "$WORK/venv"
    "$WORK/venv/bin/python" -m pip install -q --upgrade pip >/dev/null
    "$WORK/venv/bin/python" -m pip install -q "$WORK[test]"
    rm -rf "$WORK/build" "$WORK"/*.egg-info "$WORK"/src/*.egg-info
    chown -R "$TEST_USER:" "$WORK"
    chmod 755 "$WORK"
fi
[ "$PHASE" = prepare ] && exit 0

echo "== tests as $TEST_USER (uid $(id -u "$TEST_USER"))"
cd "$WORK"
# The agent CLIs root installed, when that user can reach them (a checkout under /root it cannot:
# then the tests install their own into that user's home, trusting the CAs root's npm does).
AGENTS_CACHE="$ROOT/tests/agents/.cache"
runuser -u "$TEST_USER" -- test -x "$AGENTS_CACHE" 2>/dev/null || AGENTS_CACHE="/home/$TEST_USER/.stockade-agents"
# The installed package, not the copied sources, is what gets imported.
runuser -u "$TEST_USER" -- env -i HOME="/home/$TEST_USER" PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 \
    STOCKADE_MUST_SANDBOX="${STOCKADE_MUST_SANDBOX:-1}" STOCKADE_AGENTS_CACHE="$AGENTS_CACHE" \
    ${NODE_EXTRA_CA_CERTS:+NODE_EXTRA_CA_CERTS="$NODE_EXTRA_CA_CERTS"} \
    "$WORK/venv/bin/python" -m pytest -q -p no:cacheprovider "$@"
