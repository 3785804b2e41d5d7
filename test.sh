#!/usr/bin/env bash
# Sets up everything stockade's tests need, then runs the whole suite: as the
# current user, and, when that is root, once more as an unprivileged user
# (a venv from Debian's /usr/bin/python3 and a copy of the tree it can read).
# As root, the first half runs while that user's own stockade daemon is alive:
# the suite must pass on a machine shared with another stockade user.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/setup.sh
export STOCKADE_MUST_SANDBOX=${STOCKADE_MUST_SANDBOX:-1}

unprivileged=0
if [ "$(id -u)" -eq 0 ] && [ "${STOCKADE_SKIP_UNPRIVILEGED:-0}" != 1 ]; then
    unprivileged=1
    STOCKADE_UNPRIVILEGED_PHASE=prepare bash scripts/test-unprivileged.sh
    bash scripts/other-user-daemon.sh start
    trap 'bash scripts/other-user-daemon.sh stop' EXIT
fi

echo "== tests as $(id -un) (uid $(id -u))"
.venv/bin/python -m pytest -q "$@"

if [ "$unprivileged" = 1 ]; then
    bash scripts/other-user-daemon.sh stop
    STOCKADE_UNPRIVILEGED_PHASE=run bash scripts/test-unprivileged.sh "$@"
fi
