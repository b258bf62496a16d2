"""``openai_realtime``'s code: the session (see :mod:`.session`)."""

from __future__ import annotations

from polystream.dialects.openai_realtime.session import RealtimeAPISession

__all__ = ["Session"]

Session = RealtimeAPISession
"""The family's sans-I/O session."""
