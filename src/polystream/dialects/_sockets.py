"""The WebSocket families: one line each, like the dialect registry beside it.

Each family is a folder ``polystream/dialects/<name>/`` with ``SPEC`` (a
:class:`~polystream.dialects._socket_spec.SocketSpec`, data), ``Session`` (its sans-I/O
session, imported on first use) and, for the emulator, ``Server`` (its sans-I/O server).
"""

from __future__ import annotations

import importlib
from typing import Any, Final

from polystream.dialects._realtime.context import Context
from polystream.dialects._realtime.context import open_context as open_shared_context
from polystream.dialects._realtime.server import Replier, SocketServer
from polystream.dialects._realtime.session import RealtimeSession
from polystream.dialects._socket_spec import SocketSpec
from polystream.errors import LocalProtocolError

__all__ = [
    "SOCKETS",
    "SOCKET_SPECS",
    "mint_token",
    "open_context",
    "open_server",
    "open_session",
]

SOCKETS: Final = (
    "openai_responses_ws",
    "openai_realtime",
    "xai_responses_ws",
    "xai_realtime",
    "xai_tts",
    "xai_stt",
    "gemini_live",
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


def open_context(name: str) -> Context | None:
    """A new record of what carries a connection of the family ``name`` over to a new
    one (its descriptor's ``context``): the family's own ``Context`` when its binding
    has one, else the shared kind; None when the family keeps none.

    Raises:
        LocalProtocolError: No family has that name.
    """
    spec = SOCKET_SPECS.get(name)
    if spec is None:
        raise LocalProtocolError(f"unknown WebSocket family {name!r} (known: {', '.join(SOCKETS)})")
    if spec.context is None:
        return None
    binding = importlib.import_module(f"polystream.dialects.{name}.binding")
    own = getattr(binding, "Context", None)
    if own is not None:
        context: Context = own()
        return context
    return open_shared_context(spec.context)


def mint_token(
    name: str, shared: dict[str, Any], body: Any, now: float
) -> tuple[int, dict[str, Any]]:
    """Mint an ephemeral token of the family ``name`` (its descriptor's ``token_path``)
    for the request ``body`` (parsed JSON), kept in ``shared`` (what its emulated
    servers keep): the HTTP status and the JSON answer.

    Raises:
        LocalProtocolError: No family has that name, or it mints no tokens.
    """
    spec = SOCKET_SPECS.get(name)
    binding = importlib.import_module(f"polystream.dialects.{name}.binding") if spec else None
    mint = getattr(binding, "mint_token", None)
    if spec is None or spec.token_path is None or mint is None:
        raise LocalProtocolError(f"the WebSocket family {name!r} mints no tokens", dialect=name)
    answer: tuple[int, dict[str, Any]] = mint(shared, body, now)
    return answer
