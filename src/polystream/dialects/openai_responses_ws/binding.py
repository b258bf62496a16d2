"""``openai_responses_ws``'s code: the session (see :mod:`.session`) and the server the
emulator runs (see :mod:`.server`)."""

from __future__ import annotations

from polystream.dialects.openai_responses_ws.server import ResponsesSocketServer
from polystream.dialects.openai_responses_ws.session import ReplyDecoder, ResponsesSocketSession

__all__ = ["ReplyDecoder", "Server", "Session"]

Session = ResponsesSocketSession
"""The family's sans-I/O session."""

Server = ResponsesSocketServer
"""The family's sans-I/O server (the emulator's side of a connection)."""
