"""Usage updates kept back, for the encoders that write usage only at the end.

Such an encoder's fast path for another dialect's :class:`~polystream.events.UsageUpdate`
only appends its usage to a list (at most :data:`BATCH` long); :func:`fold` merges them
into the usage so far before anything reads it. A stream that restates its cumulative
usage on every chunk (Gemini) costs one cheap :meth:`~polystream.events.Usage.merged`
per update: each newer usage reports every count the older did, so the merge returns
it as it is.
"""

from __future__ import annotations

from typing import Final

from polystream.events import Usage

__all__ = ["BATCH", "FoldsUsage", "fold"]

BATCH: Final = 64
"""Updates an encoder keeps before folding them (memory stays bounded)."""


def fold(usage: Usage | None, updates: list[Usage]) -> Usage | None:
    """What ``for u in updates: usage = u if usage is None else usage.merged(u)`` leaves.

    (Measured against a column-wise fold of the whole batch: the plain loop is about
    three times faster on cumulative updates and on empty ones, and as fast when each
    update reports different counts.)
    """
    if not updates:
        return usage
    rest = iter(updates)
    if usage is None:
        usage = next(rest)
    for update in rest:
        usage = usage.merged(update)
    return usage


class FoldsUsage:
    """For an encoder (a :class:`~polystream.dialects._base.DialectEncoder`) that keeps
    the usage so far in ``_usage``: the updates kept back are folded into it."""

    _usage: Usage | None
    _usage_batch: list[Usage]

    def _fold_usage(self) -> None:
        """Fold the usage updates kept back into ``_usage``."""
        self._usage = fold(self._usage, self._usage_batch)
        self._usage_batch.clear()
