"""The listening socket of a serving command, bound before anything is printed: a
port in use (or an address the host does not have) is one clean message and exit
code 2, not a banner followed by a server's failure."""

from __future__ import annotations

import socket
import sys

__all__ = ["bind", "split_listen"]


def split_listen(value: str) -> tuple[str, int] | None:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as the host to bind and the port, or
    None when it is no such thing."""
    host, _, port = value.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not port.isdigit() or int(port) > 65535:
        return None
    return host or "127.0.0.1", int(port)


def bind(command: str, host: str, port: int) -> socket.socket | None:
    """A TCP socket bound to ``host:port`` (the server listens on it), or None once
    ``polystream COMMAND: cannot listen on HOST:PORT: REASON`` is on stderr."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # (Named TCP, not protocol 0: asyncio disables Nagle's algorithm only on a socket
    # whose protocol says TCP, and an accepted connection takes the listener's. Under
    # uvicorn, small writes would otherwise wait for the client's delayed ACK, 40 ms.)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        reason = exc.strerror or str(exc) or type(exc).__name__
        shown = f"[{host}]" if family == socket.AF_INET6 else host
        print(
            f"polystream {command}: cannot listen on {shown}:{port}: "
            f"{reason[:1].lower()}{reason[1:]}",
            file=sys.stderr,
        )
        return None
    return sock
