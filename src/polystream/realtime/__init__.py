"""Realtime (WebSocket) sessions, sans-I/O.

A session reads the server's messages and gives unified events, each wrapped in a
:class:`Routed` that names the reply it belongs to; its commands give the client's
messages as JSON texts. Moving the messages over a socket is the caller's part::

    from polystream.realtime import open_session

    session = open_session("openai_realtime")
    await ws.send(*session.configure(instructions="Be brief."))
    async for message in ws:
        for routed in session.feed(message):
            handle(routed.stream, routed.event)

See ``docs/realtime.md``; the audio helpers are in :mod:`polystream.audio`.
"""

from __future__ import annotations

from polystream.dialects._realtime.session import RealtimeSession, Routed
from polystream.dialects._socket_spec import SocketSpec
from polystream.dialects._sockets import SOCKET_SPECS, SOCKETS, open_server, open_session

__all__ = [
    "SOCKETS",
    "SOCKET_SPECS",
    "RealtimeSession",
    "Routed",
    "SocketSpec",
    "open_server",
    "open_session",
]
