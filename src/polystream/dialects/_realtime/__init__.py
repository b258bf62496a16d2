"""What the WebSocket families share: the sans-I/O session base and its routed events
(see :mod:`.session`)."""

from __future__ import annotations

from polystream.dialects._realtime.session import RealtimeSession, Routed

__all__ = ["RealtimeSession", "Routed"]
