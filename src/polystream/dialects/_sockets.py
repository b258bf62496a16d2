"""The WebSocket families: one line each, like the dialect registry beside it.

Each family is a folder ``polystream/dialects/<name>/`` with ``SPEC`` (a
:class:`~polystream.dialects._socket_spec.SocketSpec`, data), ``Session`` (its sans-I/O
session, imported on first use) and, for the emulator, ``Server`` (its sans-I/O server).
"""

from __future__ import annotations

import importlib
from typing import Any, Final

from polystream.dialects._realtime.server import Replier, SocketServer
from polystream.dialects._realtime.session import RealtimeSession
from polystream.dialects._socket_spec import SocketSpec
from polystream.errors import LocalProtocolError

__all__ = ["SOCKETS", "SOCKET_SPECS", "open_server", "open_session"]

SOCKETS: Final = (
    "openai_responses_ws",
    "openai_realtime",
    "xai_responses_ws",
    "xai_realtime",
    "xai_tts",
    "xai_stt",
    "gemini_lyria",
)
"""The WebSocket families with a session."""

SOCKET_SPECS: Final[dict[str, SocketSpec]] = {
    name: importlib.import_module(f"polystream.dialects.{name}.spec").SPEC for name in SOCKETS
}
"""Every WebSocket family's descriptor, by name."""


def open_session(name: str, **options: Any) -> RealtimeSession:
    """A new sans-I/O session of the family ``name``; ``options`` go to its constructor
    (``strict``, ``keep_raw``, ...).

    Raises:
        LocalProtocolError: No family has that name.
    """
    if name not in SOCKET_SPECS:
        raise LocalProtocolError(f"unknown WebSocket family {name!r} (known: {', '.join(SOCKETS)})")
    binding = importlib.import_module(f"polystream.dialects.{name}.binding")
    session: RealtimeSession = binding.Session(**options)
    return session


def open_server(name: str, replier: Replier, **options: Any) -> SocketServer:
    """A new sans-I/O server of the family ``name`` (the emulator's side of one
    connection); ``replier`` chooses its replies, ``options`` go to its constructor.

    Raises:
        LocalProtocolError: No family has that name, or it has no server.
    """
    if name not in SOCKET_SPECS:
        raise LocalProtocolError(f"unknown WebSocket family {name!r} (known: {', '.join(SOCKETS)})")
    binding = importlib.import_module(f"polystream.dialects.{name}.binding")
    server_class = getattr(binding, "Server", None)
    if server_class is None:
        raise LocalProtocolError(f"the WebSocket family {name!r} has no server", dialect=name)
    server: SocketServer = server_class(replier, **options)
    return server
