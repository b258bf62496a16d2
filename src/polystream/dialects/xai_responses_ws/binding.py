"""``xai_responses_ws``'s code: the shared Responses WebSocket session and server
(:mod:`polystream.dialects._responses_ws`) bound to xAI's name, descriptor and quirks.

xAI documents the same protocol as OpenAI's (``response.create`` with the body of
``POST /v1/responses`` less ``stream`` and ``background``; ``generate: false`` warm-ups;
``previous_response_id`` continued from the connection's memory, with ``store: false``
too). Each reply is decoded by the shared Responses decoder with xAI's quirks, so it is
an ``xai_responses`` stream, event for event what the same events give over SSE. xAI
documents no lanes (``stream_id``), no steering or injection, and no connection limit:
the session has one lane, and :meth:`~Session.steer` and :meth:`~Session.inject` raise.

The emulator's server writes each reply with the shared Responses encoder and xAI's
quirks: an ``xai_responses`` stream, each event one message.
"""

from __future__ import annotations

from typing import ClassVar

from polystream.dialects._responses.decode import ResponsesDecoder
from polystream.dialects._responses.encode import ResponsesEncoder
from polystream.dialects._responses.quirks import XAI, Quirks
from polystream.dialects._responses_ws.server import ResponsesSocketServer
from polystream.dialects._responses_ws.session import ResponsesSocketSession
from polystream.dialects._socket_spec import SocketSpec
from polystream.dialects.xai_responses_ws.spec import SPEC

__all__ = ["ReplyDecoder", "ReplyEncoder", "Server", "Session"]


class ReplyDecoder(ResponsesDecoder):
    """One reply's decoder: the shared Responses decoder, xAI's quirks (each reply is
    an ``xai_responses`` stream)."""

    dialect: ClassVar[str] = "xai_responses"
    quirks: ClassVar[Quirks] = XAI


class Session(ResponsesSocketSession):
    """An xAI Responses WebSocket connection (see
    :class:`~polystream.dialects._responses_ws.session.ResponsesSocketSession`)."""

    dialect: ClassVar[str] = "xai_responses_ws"
    spec: ClassVar[SocketSpec] = SPEC
    reply_decoder: ClassVar[type[ResponsesDecoder]] = ReplyDecoder
    steering: ClassVar[bool] = False


class ReplyEncoder(ResponsesEncoder):
    """One reply's encoder, in the emulator: the shared Responses encoder, xAI's
    quirks."""

    dialect: ClassVar[str] = "xai_responses"
    quirks: ClassVar[Quirks] = XAI


class Server(ResponsesSocketServer):
    """The family's sans-I/O server (the emulator's side of a connection; see
    :class:`~polystream.dialects._responses_ws.server.ResponsesSocketServer`)."""

    family: ClassVar[str] = "xai_responses_ws"
    reply_encoder: ClassVar[type[ResponsesEncoder]] = ReplyEncoder
