"""``gemini_lyria``'s code: the session (:mod:`.session`), the server the emulator runs
(:mod:`.server`) and the emulator's music (:mod:`.music`)."""

from __future__ import annotations

from polystream.dialects.gemini_lyria.music import music_pcm
from polystream.dialects.gemini_lyria.server import LyriaServer
from polystream.dialects.gemini_lyria.session import LyriaSession, close_error

__all__ = ["Server", "Session", "close_error", "music_pcm"]

Session = LyriaSession
"""The family's sans-I/O session."""

Server = LyriaServer
"""The family's sans-I/O server (the emulator's side of a connection)."""
