"""The I/O shells around the emulator core (layer 5): the ASGI app and its runner.

``create_app(emulator)`` builds the Starlette app; ``ServerThread`` serves it with
uvicorn in a background thread (tests, ``polystream demo``); ``load_emulator`` reads
scenario files and captures. ``polystream serve`` runs it in the foreground. The
WebSocket families are served by the same app (``SOCKET_ENDPOINTS``). See
``docs/emulator.md``. ``prepare_tls(DIR)`` makes or checks the local certificate
authority and server certificate that ``tls=DIR`` and ``--tls DIR`` serve with.
"""

from __future__ import annotations

from polystream.server._app import (
    ENDPOINTS,
    SOCKET_ENDPOINTS,
    ServerStats,
    create_app,
    quiet_dropped_connections,
)
from polystream.server._run import ServerThread, load_emulator
from polystream.server._tls import TLSError, TLSFiles, prepare_tls

__all__ = [
    "ENDPOINTS",
    "SOCKET_ENDPOINTS",
    "ServerStats",
    "ServerThread",
    "TLSError",
    "TLSFiles",
    "create_app",
    "load_emulator",
    "prepare_tls",
    "quiet_dropped_connections",
]
