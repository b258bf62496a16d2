"""One turn of a voice WebSocket as a unified stream: ``StreamStart`` (implicit: the
services send no opening message), blocks keyed as the session chooses (an utterance
per channel, the one audio block), one ``Finish`` last."""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any, Final

from polystream.events import BlockEnd, BlockKind, BlockStart, Event, MediaInfo, StreamStart

__all__ = ["IMPLICIT", "Turn"]

IMPLICIT: Final[dict[str, Any]] = {"implicit": True}


class Turn:
    """The state of one turn while it runs.

    Args:
        number: Its stream number on the connection.
        dialect: The stream's dialect (its ``StreamStart``).
        out: Where its ``StreamStart`` goes.
    """

    __slots__ = ("_next", "number", "open")

    def __init__(self, number: int, dialect: str, out: list[Event]) -> None:
        self.number = number
        self._next = 0
        self.open: dict[Hashable, int] = {}
        """The open blocks, by the session's key."""
        out.append(StreamStart(dialect=dialect, extra=IMPLICIT))

    def block(
        self,
        key: Hashable,
        kind: BlockKind,
        out: list[Event],
        *,
        media: MediaInfo | None = None,
        extra: dict[str, Any] = IMPLICIT,
    ) -> int:
        """The open block under ``key``, opened (``BlockStart``) if there is none."""
        index = self.open.get(key)
        if index is None:
            index = self.open[key] = self._next
            self._next += 1
            out.append(BlockStart(index=index, kind=kind, media=media, extra=extra))
        return index

    def end(self, key: Hashable, out: list[Event], *, status: str | None = None) -> None:
        """End the block under ``key``, if one is open."""
        index = self.open.pop(key, None)
        if index is not None:
            out.append(BlockEnd(index=index, status=status, extra=IMPLICIT))

    def end_all(self, out: list[Event], *, status: str | None = None) -> None:
        """End every open block, in order."""
        for key in sorted(self.open, key=self.open.__getitem__):
            self.end(key, out, status=status)
