"""The run's side of the network filter, in the `stockade run` process (and `stockade approve`).

- `api`: what the backends import, as one light import.
- `launch`: find this user's daemon, or start one (`python -m stockade.proxy.daemon`).
- `handover`: a Linux run's session and its sandbox's listener, handed over at once.
- `sessionclient`: register, end and ask about a session over the control socket.
- `asking`: put each held request to the user, and send the answer back.
- `credentials`: read a run's credentials outside the sandbox, and make their placeholders.
- `cabundle`: the certificates a sandbox trusts when the daemon terminates its TLS.
- `sshroute`: ssh through the filter (a ProxyCommand, an ssh config, host keys).

On the hot path of every networked run: the standard library only (mitmproxy
only in `cabundle`, to make the user's CA the first time it is needed).
"""
