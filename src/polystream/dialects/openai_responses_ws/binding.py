"""``openai_responses_ws``'s code: the shared Responses WebSocket session
(:mod:`polystream.dialects._responses_ws`) bound to OpenAI's name, descriptor and
quirks, and the server the emulator runs (see :mod:`.server`)."""

from __future__ import annotations

from typing import ClassVar

from polystream.dialects._responses.decode import ResponsesDecoder
from polystream.dialects._responses.quirks import OPENAI, Quirks
from polystream.dialects._responses_ws.session import ResponsesSocketSession
from polystream.dialects._socket_spec import SocketSpec
from polystream.dialects.openai_responses_ws.server import ResponsesSocketServer
from polystream.dialects.openai_responses_ws.spec import SPEC

__all__ = ["ReplyDecoder", "Server", "Session"]


class ReplyDecoder(ResponsesDecoder):
    """One reply's decoder: the shared Responses decoder, OpenAI's quirks (each reply
    is an ``openai_responses`` stream)."""

    dialect: ClassVar[str] = "openai_responses"
    quirks: ClassVar[Quirks] = OPENAI


class Session(ResponsesSocketSession):
    """An OpenAI Responses WebSocket connection (see
    :class:`~polystream.dialects._responses_ws.session.ResponsesSocketSession`)."""

    dialect: ClassVar[str] = "openai_responses_ws"
    spec: ClassVar[SocketSpec] = SPEC
    reply_decoder: ClassVar[type[ResponsesDecoder]] = ReplyDecoder


Server = ResponsesSocketServer
"""The family's sans-I/O server (the emulator's side of a connection)."""
