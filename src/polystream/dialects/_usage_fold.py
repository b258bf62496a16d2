"""Usage updates folded in batches, for the encoders that write usage only at the end.

A stream that reports usage on every chunk (Gemini) would cost one
:meth:`~polystream.events.Usage.merged` per chunk; an encoder keeps up to :data:`BATCH`
updates instead and folds them at once (:func:`fold`), with the same result.
"""

from __future__ import annotations

from functools import partial
from itertools import compress
from operator import is_not, itemgetter
from typing import Final

from msgspec.structs import astuple

from polystream.events import Usage

__all__ = ["BATCH", "FoldsUsage", "fold"]

BATCH: Final = 64
"""Updates an encoder keeps before folding them (memory stays bounded)."""

_FIELDS: Final = Usage.__struct_fields__
_SHAPED: Final = _FIELDS == (
    "input_tokens",
    "output_tokens",
    "reasoning_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "tool_prompt_tokens",
    "audio_input_tokens",
    "audio_output_tokens",
    "total_tokens",
    "raw",
)
"""The fields :meth:`Usage.merged` and :meth:`Usage.is_empty` are written for (the
counts, then ``raw``); for any other shape :func:`fold` merges one by one."""
_COUNTS: Final = len(_FIELDS) - 1
_IS_SET: Final = partial(is_not, None)
_COUNTS_OF: Final = itemgetter(slice(0, _COUNTS))


def fold(usage: Usage | None, updates: list[Usage]) -> Usage | None:
    """What ``for u in updates: usage = u if usage is None else usage.merged(u)`` leaves.

    :meth:`Usage.merged` skips an empty update (every count None or 0) and otherwise
    takes each field the update sets: so each field is the last value set by the
    first usage or a non-empty update.
    """
    if not updates:
        return usage
    start = 0
    if usage is None:
        usage = updates[0]
        start = 1
    if not _SHAPED:
        for update in updates[start:]:
            usage = usage.merged(update)
        return usage
    rows = list(map(astuple, updates[start:]))
    rows = list(compress(rows, map(any, map(_COUNTS_OF, rows))))
    if not rows:
        return usage  # merged() returns the usage itself for an empty update
    values = []
    for column in zip(astuple(usage), *rows, strict=True):
        last = column[-1]
        if last is None:
            # The last value set, if any (most fields are set by every update or none).
            last = (
                None
                if column.count(None) == len(column)
                else next(filter(_IS_SET, reversed(column)))
            )
        values.append(last)
    return Usage(**dict(zip(_FIELDS, values, strict=True)))


class FoldsUsage:
    """For an encoder (a :class:`~polystream.dialects._base.DialectEncoder`) that keeps
    the usage so far in ``_usage``: the updates kept back are folded into it."""

    _usage: Usage | None
    _usage_batch: list[Usage]

    def _fold_usage(self) -> None:
        """Fold the usage updates kept back into ``_usage``."""
        self._usage = fold(self._usage, self._usage_batch)
        self._usage_batch.clear()
