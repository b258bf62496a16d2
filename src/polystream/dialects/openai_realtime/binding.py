"""``openai_realtime``'s code: the session (see :mod:`.session`) and the server the
emulator runs (see :mod:`.server`)."""

from __future__ import annotations

from polystream.dialects.openai_realtime.server import RealtimeServer
from polystream.dialects.openai_realtime.session import RealtimeAPISession

__all__ = ["Server", "Session"]

Session = RealtimeAPISession
"""The family's sans-I/O session."""

Server = RealtimeServer
"""The family's sans-I/O server (the emulator's side of a connection)."""
