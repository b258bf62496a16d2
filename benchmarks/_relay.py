"""The floor under any gateway: a process that only moves bytes.

``python -m benchmarks._relay LISTEN_PORT UPSTREAM_PORT`` accepts connections on
loopback and, for each, opens one connection to the upstream and copies every read of
either side to the other as it comes: no HTTP parsing, no decoding, no journal. It runs
on asyncio's default loop with the socket options the gateway uses (``TCP_NODELAY``
both ways, ``TCP_QUICKACK`` re-armed after each upstream read), so that what it adds to
a request is what one more Python process in the path costs on this machine: the two
extra loopback hops, its wake-ups and its reads and writes. :mod:`benchmarks.gateway`
measures it interleaved with the direct calls and the gateway's; the gateway's added
latency less the relay's is the gateway's own work.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sys

from polystream.cli._heap import settle_heap

_QUICKACK = getattr(socket, "TCP_QUICKACK", None)


def _nodelay(transport: asyncio.BaseTransport) -> socket.socket | None:
    sock: socket.socket | None = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class _Upstream(asyncio.Protocol):
    """The relay's connection to the upstream: what it reads goes to the client."""

    def __init__(self, downstream: _Downstream) -> None:
        self.downstream = downstream
        self.transport: asyncio.Transport | None = None
        self.sock: socket.socket | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.sock = _nodelay(transport)
        self._ack()

    def _ack(self) -> None:
        if self.sock is not None and _QUICKACK is not None:
            with contextlib.suppress(OSError):
                self.sock.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)

    def data_received(self, data: bytes) -> None:
        self._ack()
        client = self.downstream.transport
        if client is not None:
            client.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        if self.downstream.transport is not None:
            self.downstream.transport.close()


class _Downstream(asyncio.Protocol):
    """A client's connection: what it reads goes to its upstream connection (opened
    when the client connects; reads before it is open wait in a list)."""

    upstream_class: type[_Upstream] = _Upstream
    """The upstream connection's protocol (a subclass's: what it does with the reads)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.transport: asyncio.Transport | None = None
        self.upstream: _Upstream | None = None
        self.waiting: list[bytes] = []

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        _nodelay(transport)
        asyncio.get_running_loop().create_task(self._connect())

    async def _connect(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            _, upstream = await loop.create_connection(
                lambda: self.upstream_class(self), "127.0.0.1", self.upstream_port
            )
        except OSError:
            if self.transport is not None:
                self.transport.close()
            return
        self.upstream = upstream
        if self.transport is None and upstream.transport is not None:
            upstream.transport.close()  # the client left while this connected
            return
        if self.waiting and upstream.transport is not None:
            upstream.transport.write(b"".join(self.waiting))
        self.waiting = []

    def data_received(self, data: bytes) -> None:
        upstream = self.upstream
        if upstream is None or upstream.transport is None:
            self.waiting.append(data)
        else:
            upstream.transport.write(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.upstream is not None and self.upstream.transport is not None:
            self.upstream.transport.close()


async def serve(
    listen_port: int, upstream_port: int, client: type[_Downstream] = _Downstream
) -> None:
    """Relay ``127.0.0.1:listen_port`` to ``127.0.0.1:upstream_port`` until cancelled
    (``client``: the client connections' protocol)."""
    loop = asyncio.get_running_loop()
    server = await loop.create_server(
        lambda: client(upstream_port), "127.0.0.1", listen_port, reuse_address=True
    )
    settle_heap()  # as the gateway does before it serves
    async with server:
        await server.serve_forever()


def main(
    argv: list[str], client: type[_Downstream] = _Downstream, name: str = "benchmarks._relay"
) -> int:
    if len(argv) != 2:
        print(f"usage: python -m {name} LISTEN_PORT UPSTREAM_PORT", file=sys.stderr)
        return 2
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(int(argv[0]), int(argv[1]), client))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
