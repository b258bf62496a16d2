"""OpenAI Responses finish reasons.

The shared table: :mod:`polystream.dialects._responses.finish_reason`.
"""

from __future__ import annotations

from polystream.dialects._responses.finish_reason import FINISH_REASONS, map_finish_reason

__all__ = ["FINISH_REASONS", "map_finish_reason"]
