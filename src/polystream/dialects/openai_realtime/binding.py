"""``openai_realtime``'s code: the shared Realtime API session
(:mod:`polystream.dialects._realtime_api`) bound to OpenAI's name and descriptor, and
the shared server the emulator runs
(:class:`~polystream.dialects._realtime_api.server.RealtimeServer`)."""

from __future__ import annotations

from typing import ClassVar

from polystream.dialects._realtime_api.server import RealtimeServer
from polystream.dialects._realtime_api.session import RealtimeAPISession
from polystream.dialects._socket_spec import SocketSpec
from polystream.dialects.openai_realtime.spec import SPEC

__all__ = ["Server", "Session"]


class Session(RealtimeAPISession):
    """An OpenAI Realtime WebSocket session (see
    :class:`~polystream.dialects._realtime_api.session.RealtimeAPISession`)."""

    dialect: ClassVar[str] = "openai_realtime"
    spec: ClassVar[SocketSpec] = SPEC


class Server(RealtimeServer):
    """The family's sans-I/O server (the emulator's side of a connection; see
    :class:`~polystream.dialects._realtime_api.server.RealtimeServer`)."""

    family: ClassVar[str] = "openai_realtime"
