"""xAI Chat Completions ``finish_reason`` table
(shared: :mod:`polystream.dialects._chat.finish_reason`)."""

from __future__ import annotations

from polystream.dialects._chat.finish_reason import map_finish_reason, to_wire_finish_reason

__all__ = ["map_finish_reason", "to_wire_finish_reason"]
