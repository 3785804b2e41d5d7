#!/usr/bin/env bash
# stockade demo: installs what is missing, then runs one command inside the
# built-in default policy and shows what the sandbox allowed and refused.
set -euo pipefail
cd "$(dirname "$0")"
source scripts/setup.sh

# Not under /tmp: the sandbox gets a private /tmp, which would hide the demo home entirely.
mkdir -p "${XDG_CACHE_HOME:-$HOME/.cache}"
DEMO=$(mktemp -d "${XDG_CACHE_HOME:-$HOME/.cache}/stockade-demo.XXXXXX")
trap 'rm -rf "$DEMO"' EXIT
mkdir -p "$DEMO/home/.ssh" "$DEMO/project"
echo "DEMO-PRIVATE-KEY" > "$DEMO/home/.ssh/id_demo"
export HOME="$DEMO/home"   # a throwaway HOME: the demo never touches yours
cd "$DEMO/project"

say() { printf '\n\033[1m%s\033[0m\n' "$*"; }

say "1. What the built-in default policy allows (stockade explain):"
stockade explain

say "2. One sandboxed command tries four things:"
cat <<'SCRIPT'
    echo build > ./output.txt              # write inside the project
    echo pwned > ~/.bashrc                 # write outside the project
    cat ~/.ssh/id_demo                     # read a secret
    python3 -c 'import socket; socket.create_connection(("1.1.1.1", 443), 3)'
SCRIPT
set +e
stockade run -- /bin/sh -c '
    echo build > ./output.txt      && echo "  inside the project : written"        || echo "  inside the project : REFUSED"
    (echo pwned > ~/.bashrc) 2>/dev/null && echo "  ~/.bashrc          : written"   || echo "  ~/.bashrc          : refused (read-only)"
    cat ~/.ssh/id_demo 2>/dev/null && echo "  ~/.ssh/id_demo     : READ"          || echo "  ~/.ssh/id_demo     : refused (hidden)"
    python3 -c "import socket; socket.create_connection((\"1.1.1.1\", 443), 3)" 2>/dev/null \
        && echo "  network            : CONNECTED" || echo "  network            : refused (no route out)"
'
set -e

say "3. Checked from outside the sandbox:"
echo "  ./output.txt contains: $(cat output.txt)"
if [ -s "$HOME/.bashrc" ]; then echo "  ~/.bashrc was changed: FAIL"; exit 1; else echo "  ~/.bashrc is untouched"; fi

say "4. The exact bwrap plan for that run (stockade run --dry-run):"
stockade run --dry-run -- true | head -25
echo "  ..."
