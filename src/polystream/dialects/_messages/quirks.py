"""The documented differences between the Messages dialects, as data.

``anthropic_messages`` and ``xai_messages`` share every line of decoding, encoding and
rebuilding; each binds one :class:`Quirks` value.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

import msgspec

__all__ = ["ANTHROPIC", "XAI", "Quirks", "next_provider_index"]


class Quirks(msgspec.Struct, frozen=True, kw_only=True):
    """Provider behaviour that differs within the Messages family.

    Fields:
        reuse_indices: The provider gives a new block the lowest ``index`` not held by
            an open block, so an index comes back once its block stopped (xAI
            ``/v1/messages``: thinking at 0, then text at 0 again; spec "Skeletons").
            When False, indices count up from 0 in order of opening (Anthropic) and a
            reused index is reported as a ``index_reused`` warning.
        pings: The provider sends ``ping`` keep-alives (Anthropic does, xAI does not).
    """

    reuse_indices: bool = False
    pings: bool = True


ANTHROPIC: Final = Quirks(reuse_indices=False, pings=True)
"""Anthropic Messages."""

XAI: Final = Quirks(reuse_indices=True, pings=False)
"""xAI ``/v1/messages`` (deprecated by xAI, still served)."""


def next_provider_index(quirks: Quirks, opened: int, open_indices: Collection[int]) -> int:
    """The ``index`` the provider gives the next block.

    Args:
        quirks: The dialect's quirks.
        opened: How many blocks were opened so far in the stream.
        open_indices: The provider indices of the blocks open right now.
    """
    if not quirks.reuse_indices:
        return opened
    index = 0
    while index in open_indices:
        index += 1
    return index
