"""Pure decisions: no sockets, no mitmproxy, importable from either process.

- `decide`: allow or deny one (host, port), and an HTTP request, for a session's rules and credentials.
- `gitpush`: a git push judged by the refs it updates.
- `bodies`: what a request's body asks of the origin (method overrides, a request hidden in it).
- `budget`: a session's share of the daemon's descriptors, and a pace for what it may ask.
- `fake_names`: the addresses the resolver inside gives out, each mapping back to its name.
"""
