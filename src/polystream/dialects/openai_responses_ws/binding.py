"""``openai_responses_ws``'s code: the session (see :mod:`.session`)."""

from __future__ import annotations

from polystream.dialects.openai_responses_ws.session import ReplyDecoder, ResponsesSocketSession

__all__ = ["ReplyDecoder", "Session"]

Session = ResponsesSocketSession
"""The family's sans-I/O session."""
