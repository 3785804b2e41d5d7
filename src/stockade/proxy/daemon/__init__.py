"""The proxy daemon's process: one per user, started by a run as `python -m stockade.proxy.daemon`.

- `main`: mitmproxy's Master with the filter's addons (proxy/filter/), and the daemon's life.
- `controlserver`: the control socket: who may connect, and what each op answers.
- `doorkeeper`: every session's doors, from the hand-over to what its budget refused.
- `door`: one listener inside a sandbox's namespace (proxied, transparent, or a forward).
- `inside_dns`: the resolver a sandbox's DNS queries reach, which asks no one.
- `accepting`: accepting when descriptors run out.
- `headlimit`: caps on what a sandbox can make the daemon buffer.
- `mitmparts`: the mitmproxy addons the filter runs, without the rest.
"""
