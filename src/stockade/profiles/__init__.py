"""The policy language: schema, loading, merging, trust and the mandatory floor.

Knows nothing about bwrap, Seatbelt or mitmproxy.
"""
