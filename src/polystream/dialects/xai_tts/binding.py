"""``xai_tts``'s code: the session (:mod:`.session`), the URL helpers (:mod:`.query`) and
the server the emulator runs (:mod:`.server`)."""

from __future__ import annotations

from polystream.dialects.xai_tts.query import CODEC_NAMES, tts_query, tts_url
from polystream.dialects.xai_tts.server import TTSServer
from polystream.dialects.xai_tts.session import TTSSession

__all__ = ["CODEC_NAMES", "Server", "Session", "tts_query", "tts_url"]

Session = TTSSession
"""The family's sans-I/O session."""

Server = TTSServer
"""The family's sans-I/O server (the emulator's side of a connection)."""
