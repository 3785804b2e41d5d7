"""The daemon keeps accepting after running out of descriptors, and stops only when its listener closes."""

from __future__ import annotations

import asyncio
import errno
import resource
import socket

from stockade.proxy.daemon import accepting


def _run(errors: list[int]) -> tuple[socket.socket | None, int]:
    """accept() on a real listener whose first sock_accept calls fail with `errors`."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    client = socket.create_connection(listener.getsockname())
    calls = 0

    async def main() -> socket.socket | None:
        nonlocal calls
        loop = asyncio.get_running_loop()
        real = loop.sock_accept

        async def flaky(sock: socket.socket) -> tuple[socket.socket, object]:
            nonlocal calls
            calls += 1
            if errors:
                raise OSError(errors.pop(0), "injected")
            return await real(sock)

        loop.sock_accept = flaky  # type: ignore[method-assign]
        return await accepting.accept(listener, "test")

    try:
        conn = asyncio.run(main())
        return conn, calls
    finally:
        client.close()
        listener.close()


def test_running_out_of_descriptors_is_waited_out() -> None:
    conn, calls = _run([errno.EMFILE, errno.ENFILE, errno.ECONNABORTED])
    assert conn is not None and calls == 4
    conn.close()


def test_a_closed_listener_ends_the_loop() -> None:
    conn, calls = _run([errno.EBADF])
    assert conn is None and calls == 1


def test_the_soft_descriptor_limit_is_raised_to_the_hard_one() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(256, hard), hard))
        assert accepting.raise_descriptor_limit() == hard
        assert resource.getrlimit(resource.RLIMIT_NOFILE) == (hard, hard)
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
