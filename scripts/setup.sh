#!/usr/bin/env bash
# Installs what stockade needs on a Debian or Ubuntu machine and builds .venv.
# Sourced by demo.sh and test.sh; safe to run again (it skips what is there).
set -euo pipefail

STOCKADE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
APT_PACKAGES=(bubblewrap libseccomp2 nftables python3 python3-venv curl openssl iproute2 util-linux ca-certificates)

need_apt=()
for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need_apt+=("$pkg")
done
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ]; then
        echo "setup: installing ${need_apt[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
    else
        echo "setup: missing Debian packages: ${need_apt[*]}" >&2
        echo "setup: run: sudo apt-get install -y ${need_apt[*]}" >&2
        exit 1
    fi
fi

# Python 3.11 or newer: the default python3 if it is new enough, else Debian's.
PYTHON=${STOCKADE_PYTHON:-}
if [ -z "$PYTHON" ]; then
    for candidate in python3 /usr/bin/python3; do
        if command -v "$candidate" >/dev/null && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
            PYTHON=$candidate
            break
        fi
    done
fi
[ -n "$PYTHON" ] || { echo "setup: stockade needs Python 3.11 or newer" >&2; exit 1; }

VENV="$STOCKADE_ROOT/.venv"
if [ ! -x "$VENV/bin/stockade" ] || [ "$STOCKADE_ROOT/pyproject.toml" -nt "$VENV/.installed" ]; then
    echo "setup: building $VENV with $PYTHON"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
    "$VENV/bin/python" -m pip install -q -e "$STOCKADE_ROOT[test]"
    touch "$VENV/.installed"
fi
export PATH="$VENV/bin:$PATH"
