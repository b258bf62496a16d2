"""Realtime (WebSocket) sessions, sans-I/O, and a client that runs them over a socket.

A session reads the server's messages and gives unified events, each wrapped in a
:class:`Routed` that names the reply it belongs to; its commands give the client's
messages as JSON texts. Moving the messages over a socket is the caller's part::

    from polystream.realtime import open_session

    session = open_session("openai_realtime")
    await ws.send(*session.configure(instructions="Be brief."))
    async for message in ws:
        for routed in session.feed(message):
            handle(routed.stream, routed.event)

or the client's (:func:`connect`, :func:`connect_sync`, :func:`text_turn`; they need
the ``realtime`` extra)::

    async with connect("openai_realtime", model="gpt-realtime") as conn:
        await conn.send_text("Hello")
        async for routed in conn:
            handle(routed.stream, routed.event)

See ``docs/realtime.md``; the audio helpers are in :mod:`polystream.audio`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from polystream.dialects._realtime.session import RealtimeSession, Routed
from polystream.dialects._socket_spec import SocketSpec
from polystream.dialects._sockets import SOCKET_SPECS, SOCKETS, open_server, open_session
from polystream.realtime._bridge import Bridge, Step, bridge_refusal
from polystream.realtime._endpoint import Endpoint, endpoint
from polystream.realtime._link import DEFAULT_RECONNECT, SocketLink

if TYPE_CHECKING:
    from polystream.client._realtime import AsyncConnection, connect, text_turn
    from polystream.client._realtime_sync import Connection, connect_sync, text_turn_sync

__all__ = [
    "DEFAULT_RECONNECT",
    "SOCKETS",
    "SOCKET_SPECS",
    "AsyncConnection",
    "Bridge",
    "Connection",
    "Endpoint",
    "RealtimeSession",
    "Routed",
    "SocketLink",
    "SocketSpec",
    "Step",
    "bridge_refusal",
    "connect",
    "connect_sync",
    "endpoint",
    "open_server",
    "open_session",
    "text_turn",
    "text_turn_sync",
]

_ASYNC = frozenset({"AsyncConnection", "connect", "text_turn"})
_SYNC = frozenset({"Connection", "connect_sync", "text_turn_sync"})


def __getattr__(name: str) -> object:
    # The socket client is a shell (websockets): imported when first used, so that the
    # sessions need nothing but the core.
    if name in _ASYNC:
        from polystream.client import _realtime

        return getattr(_realtime, name)
    if name in _SYNC:
        from polystream.client import _realtime_sync

        return getattr(_realtime_sync, name)
    raise AttributeError(f"module 'polystream.realtime' has no attribute {name!r}")
