"""Bytes kept in pieces until they are whole: memory bounded by their size, not their count.

A framer keeps what a chunk leaves unfinished (a line, an event's ``data:`` lines, an
array element) as a list of pieces and joins them once the thing is whole. Its limits
count bytes, but each piece also costs an object and a reference, far more than its
bytes when pieces are short: a line trickled a few bytes per network read, an event of
many one-character ``data:`` lines. Joining the recent pieces every :data:`PIECES`
keeps memory near the byte count the limits bound, and copies each byte here once.
"""

from __future__ import annotations

from typing import Final

__all__ = ["PIECES", "join_recent"]

PIECES: Final = 1024
"""Pieces kept apart before the recent ones are joined."""


def join_recent(pieces: list[bytes], joined: int, separator: bytes = b"") -> int:
    """Join ``pieces[joined:]`` (with ``separator``) into one piece, in place.

    Args:
        pieces: The pieces so far; the first ``joined`` are joins already.
        joined: How many of them are joins.
        separator: What goes between two pieces when the whole is made (LF for
            ``data:`` lines).

    Returns:
        How many pieces are joins now (``joined + 1``).
    """
    pieces[joined:] = [separator.join(pieces[joined:])]
    return joined + 1
