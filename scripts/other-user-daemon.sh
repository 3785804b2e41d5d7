#!/usr/bin/env bash
# start|stop: a stockade proxy daemon owned by the unprivileged test user, so the
# root half of the suite runs on a machine where another user's stockade is alive
# (its sockets in a folder root's sandboxes cannot enter). Needs the venv that
# scripts/test-unprivileged.sh prepares.
set -euo pipefail
TEST_USER=${STOCKADE_TEST_USER:-stockade-test}
WORK=${STOCKADE_UNPRIVILEGED_WORK:-/var/tmp/stockade-unprivileged}
HOME_DIR=$(getent passwd "$TEST_USER" | cut -d: -f6)

case "${1:-}" in
start)
    install -d -o "$TEST_USER" -m 700 "$HOME_DIR/daemon-start"
    cd "$HOME_DIR/daemon-start"
    runuser -u "$TEST_USER" -- env -i HOME="$HOME_DIR" PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8 \
        STOCKADE_PROXY_IDLE=7200 "$WORK/venv/bin/stockade" run --quiet --profile pypi -- true
    pgrep -u "$TEST_USER" -f stockade.proxy.daemon >/dev/null || { echo "other-user-daemon: no daemon started" >&2; exit 1; }
    echo "== a stockade daemon of $TEST_USER is alive (pid $(pgrep -u "$TEST_USER" -f stockade.proxy.daemon | head -1))"
    ;;
stop)
    pkill -u "$TEST_USER" -f stockade.proxy.daemon || true
    ;;
*)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
