"""The network filter: one package per process, and what both processes share.

- `client/`: runs in `stockade run` (and `stockade approve`): finds or starts
  this user's daemon, hands it a run's session and its sandbox's listener,
  asks the user about held requests, reads credentials, builds the CA bundle
  and the ssh route. Light on purpose: standard library only, no mitmproxy.
- `daemon/`: the daemon process: mitmproxy's Master, the control socket,
  each session's door (its listeners inside the sandbox's namespace) and the
  resolver inside. Started as `python -m stockade.proxy.daemon`.
- `filter/`: the mitmproxy addons the daemon runs, what they know about each
  session and connection, and how they refuse; in the daemon's process.
- `rules/`: pure decisions both processes may use: hosts, HTTP rules and
  credentials, git push refs, request bodies, budgets, the resolver's
  addresses. No sockets, no mitmproxy.
- `control.py` (the wire format, file locations, the session spec),
  `audit.py` (the audit log) and `summary.py` (the words a run's end shows)
  are shared by both.

A package imports only those listed after it here, and `control`, `audit`
and `summary` import none of them (tests/test_layers.py). Every `__init__` is
empty of imports: `stockade run` imports `stockade.proxy.client.api`, and
nothing may pull mitmproxy onto that path.
"""
