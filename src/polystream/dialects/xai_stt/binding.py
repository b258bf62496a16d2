"""``xai_stt``'s code: the session (:mod:`.session`), the URL helpers (:mod:`.query`) and
the server the emulator runs (:mod:`.server`)."""

from __future__ import annotations

from polystream.dialects.xai_stt.query import SAMPLE_RATES, stt_query, stt_url
from polystream.dialects.xai_stt.server import STTServer
from polystream.dialects.xai_stt.session import STTSession

__all__ = ["SAMPLE_RATES", "Server", "Session", "stt_query", "stt_url"]

Session = STTSession
"""The family's sans-I/O session."""

Server = STTServer
"""The family's sans-I/O server (the emulator's side of a connection)."""
