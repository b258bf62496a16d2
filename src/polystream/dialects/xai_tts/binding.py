"""``xai_tts``'s code: the session (:mod:`.session`) and the URL helpers
(:mod:`.query`)."""

from __future__ import annotations

from polystream.dialects.xai_tts.query import CODEC_NAMES, tts_query, tts_url
from polystream.dialects.xai_tts.session import TTSSession

__all__ = ["CODEC_NAMES", "Session", "tts_query", "tts_url"]

Session = TTSSession
"""The family's sans-I/O session."""
