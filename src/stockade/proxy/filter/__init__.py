"""The filter's mitmproxy addons, what they know, and how they refuse: in the daemon's process.

In the order a request meets them: `auth` (whose session), `requests` (the
host, the HTTP rules, a git push, a body), `approvals` (held for the user),
`swapping` (credentials' placeholders, with `placeholders`: where each may go, the swap, the masks), `tunnels` (what travels in a CONNECT),
`metering` (bytes counted, records ended), `splicing` (checked traffic handed
to splice(2): `splice_tunnel`, `splice_body`; `tunnel_meter` counts a
tunnel), and `backstop` (every connection judged again before it is dialed).

What they share: `sessions` (the registry of sessions and their rules),
`state` (what is known about each connection), `tracking` (a flow's record in
progress), `refusal` (the 403 and 407 bodies and their records), `lookup` and
`resolver` (name lookups for the addons that check addresses).
"""
