"""``openai_responses_ws``'s code: the shared Responses WebSocket session and server
(:mod:`polystream.dialects._responses_ws`) bound to OpenAI's name, descriptor and
quirks."""

from __future__ import annotations

from typing import ClassVar

from polystream.dialects._responses.decode import ResponsesDecoder
from polystream.dialects._responses.encode import ResponsesEncoder
from polystream.dialects._responses.quirks import OPENAI, Quirks
from polystream.dialects._responses_ws.server import ResponsesSocketServer
from polystream.dialects._responses_ws.session import ResponsesSocketSession
from polystream.dialects._socket_spec import SocketSpec
from polystream.dialects.openai_responses_ws.spec import SPEC

__all__ = ["ReplyDecoder", "ReplyEncoder", "Server", "Session"]


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


class ReplyEncoder(ResponsesEncoder):
    """One reply's encoder, in the emulator: the shared Responses encoder, OpenAI's
    quirks."""

    dialect: ClassVar[str] = "openai_responses"
    quirks: ClassVar[Quirks] = OPENAI


class Server(ResponsesSocketServer):
    """The family's sans-I/O server (the emulator's side of a connection; see
    :class:`~polystream.dialects._responses_ws.server.ResponsesSocketServer`)."""

    family: ClassVar[str] = "openai_responses_ws"
    reply_encoder: ClassVar[type[ResponsesEncoder]] = ReplyEncoder
