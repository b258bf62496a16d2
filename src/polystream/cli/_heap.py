"""The heap of a long-running server process, settled before it serves."""

from __future__ import annotations

import gc

__all__ = ["settle_heap"]


def settle_heap() -> None:
    """Collect what start-up left unreachable, then move every object alive now out of
    the cycle collector's generations (:func:`gc.freeze`).

    A server's start-up leaves tens of thousands of objects that live as long as the
    process (modules, classes, functions, the app and its tables). Left in the oldest
    generation, each full collection walks them all again while requests wait; frozen,
    a full collection walks only what serving made. Only for a process this package
    owns (``polystream serve``, ``polystream gateway``): freezing is process-wide.
    """
    gc.collect()
    gc.freeze()
