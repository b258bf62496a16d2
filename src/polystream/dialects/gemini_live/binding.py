"""``gemini_live``'s code: the session (:mod:`.session`, its commands in
:mod:`.commands`), the record that resumes it on a new connection (:mod:`.resumption`)
and the server the emulator runs (:mod:`.server`)."""

from __future__ import annotations

from typing import ClassVar

from polystream.dialects._socket_spec import SocketSpec
from polystream.dialects.gemini_live import tokens
from polystream.dialects.gemini_live.perform import Performs
from polystream.dialects.gemini_live.resumption import ResumptionContext
from polystream.dialects.gemini_live.server import GeminiLiveServer
from polystream.dialects.gemini_live.session import GeminiLiveSession
from polystream.dialects.gemini_live.spec import SPEC

__all__ = ["Context", "Server", "Session", "mint_token"]


class Session(Performs, GeminiLiveSession):
    """A Gemini Live WebSocket session (see
    :class:`~polystream.dialects.gemini_live.session.GeminiLiveSession`)."""

    dialect: ClassVar[str] = "gemini_live"
    spec: ClassVar[SocketSpec] = SPEC


Context = ResumptionContext
"""The record that resumes the session on a new connection."""


Server = GeminiLiveServer
"""The family's sans-I/O server (the emulator's side of a connection)."""

mint_token = tokens.mint_token
"""Mints an ephemeral token (the emulator's ``POST /v1alpha/auth_tokens``)."""
