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
    echo pwned > ~/.bashrc                 # write to your home
    cat ~/.ssh/id_demo                     # read a secret
    python3 -c 'import socket; socket.create_connection(("1.1.1.1", 443), 3)'
SCRIPT
set +e
stockade run -- /bin/sh -c '
    echo build > ./output.txt      && echo "  inside the project : written"        || echo "  inside the project : REFUSED"
    (echo pwned > ~/.bashrc) 2>/dev/null && echo "  ~/.bashrc          : written to the sandbox'"'"'s own home, thrown away after the run" || echo "  ~/.bashrc          : refused (read-only)"
    cat ~/.ssh/id_demo 2>/dev/null && echo "  ~/.ssh/id_demo     : READ"          || echo "  ~/.ssh/id_demo     : refused (hidden)"
    python3 -c "import socket; socket.create_connection((\"1.1.1.1\", 443), 3)" 2>/dev/null \
        && echo "  network            : CONNECTED" || echo "  network            : refused (no route out)"
'
set -e

say "3. Checked from outside the sandbox:"
echo "  ./output.txt contains: $(cat output.txt)"
if [ -s "$HOME/.bashrc" ]; then echo "  ~/.bashrc was changed: FAIL"; exit 1; else echo "  ~/.bashrc is untouched"; fi

say "4. The network: an allowlist, an audited proxy, and no way around it"
# A web server on this machine's loopback plays the internet; the demo's test
# resolver maps two made-up names to it (no real DNS, no internet needed).
echo "hello from allowed.test" > "$DEMO/index.html"
python3 -m http.server 0 --bind 127.0.0.1 --directory "$DEMO" > "$DEMO/server.log" 2>&1 &
SERVER=$!
PORT=""
for _ in $(seq 50); do
    PORT=$(python3 - "$SERVER" <<'PY'
import subprocess
import sys
out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True).stdout
pid = sys.argv[1]
for line in out.splitlines():
    if f"pid={pid}," in line:
        print(line.split()[3].rsplit(":", 1)[1]); break
PY
)
    [ -n "$PORT" ] && break
    sleep 0.1
done
printf '{"names": {"allowed.test": ["127.0.0.1"], "denied.test": ["127.0.0.1"]}, "upstreams": ["127.0.0.1:%s"]}\n' "$PORT" > "$DEMO/names.json"
printf 'extends = ["default"]\n[network]\nallow = ["allowed.test"]\n' > .stockade.toml
stockade trust >/dev/null
export STOCKADE_PROXY_TEST_RESOLVER="$DEMO/names.json" STOCKADE_PROXY_IDLE=30
cat .stockade.toml
set +e
stockade run -- /bin/sh -c "
    echo '  allowed.test  :' \$(curl -s http://allowed.test:$PORT/index.html)
    echo '  denied.test   :' \$(curl -s http://denied.test:$PORT/index.html)
    curl -s -m 3 --noproxy '*' http://127.0.0.1:$PORT/ >/dev/null 2>&1 && echo '  around the proxy: CONNECTED' || echo '  around the proxy: refused (no route out)'
"
set -e
say "5. What the proxy decided (stockade audit):"
stockade audit
kill "$SERVER" 2>/dev/null || true
DAEMON=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$HOME/.local/state/stockade/run/proxy.port" 2>/dev/null || true)
[ -n "$DAEMON" ] && kill "$DAEMON" 2>/dev/null || true

say "6. The exact bwrap plan for a run (stockade run --dry-run):"
stockade run --dry-run -- true | head -25
echo "  ..."
