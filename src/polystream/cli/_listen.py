"""The listening socket of a serving command, bound before anything is printed: a
port in use (or an address the host does not have) is one clean message and exit
code 2, not a banner followed by a server's failure. Likewise its TLS files
(``--tls DIR``)."""

from __future__ import annotations

import socket
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from polystream.server._tls import TLSFiles

__all__ = ["bind", "prepare_tls", "split_listen", "trust_hint"]


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


_LOOPBACK_OR_ANY = frozenset({"127.0.0.1", "::1", "localhost", "0.0.0.0", "::", ""})


def prepare_tls(command: str, directory: str, host: str) -> TLSFiles | None:
    """The TLS files of ``directory`` (made there when missing), or None once
    ``polystream: error: ...`` is on stderr. A host the certificate is not for (an
    address other than loopback or every interface) is a warning."""
    try:
        from polystream.server._tls import TLSError
        from polystream.server._tls import prepare_tls as prepare
    except ImportError as exc:
        print(
            f"polystream: error: --tls needs the server extra "
            f"(pip install 'polystream[server]'): {exc}",
            file=sys.stderr,
        )
        return None
    try:
        files = prepare(directory)
    except TLSError as exc:
        print(f"polystream: error: --tls: {exc}", file=sys.stderr)
        return None
    if host not in _LOOPBACK_OR_ANY:
        print(
            f"polystream {command}: warning: the TLS certificate is for localhost, 127.0.0.1 "
            f"and ::1 only; clients that reach {host} by that name will not trust it",
            file=sys.stderr,
        )
    return files


def trust_hint(files: TLSFiles) -> str:
    """The banner's line on how clients trust the server."""
    return f"  TLS        clients trust its certificate with SSL_CERT_FILE={files.ca_file}"
