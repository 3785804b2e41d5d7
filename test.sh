#!/usr/bin/env bash
# Sets up everything stockade's tests need, then runs the whole suite: as the
# current user, and, when that is root, once more as an unprivileged user
# (a venv from Debian's /usr/bin/python3 and a copy of the tree it can read).
set -euo pipefail
cd "$(dirname "$0")"
source scripts/setup.sh
export STOCKADE_MUST_SANDBOX=${STOCKADE_MUST_SANDBOX:-1}

echo "== tests as $(id -un) (uid $(id -u))"
.venv/bin/python -m pytest -q "$@"

if [ "$(id -u)" -eq 0 ] && [ "${STOCKADE_SKIP_UNPRIVILEGED:-0}" != 1 ]; then
    bash scripts/test-unprivileged.sh "$@"
fi
