"""The network filter: allowlist decisions, audit records, the mitmproxy daemon and its client.

Kept empty on purpose: `stockade run` imports `stockade.proxy.client`, and
nothing here may pull mitmproxy onto that path.
"""
