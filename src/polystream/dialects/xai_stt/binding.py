"""``xai_stt``'s code: the session (:mod:`.session`) and the URL helpers
(:mod:`.query`)."""

from __future__ import annotations

from polystream.dialects.xai_stt.query import SAMPLE_RATES, stt_query, stt_url
from polystream.dialects.xai_stt.session import STTSession

__all__ = ["SAMPLE_RATES", "Session", "stt_query", "stt_url"]

Session = STTSession
"""The family's sans-I/O session."""
