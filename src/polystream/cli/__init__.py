"""The ``polystream`` command line. ``main(argv) -> int``; see ``polystream --help``."""

from __future__ import annotations

from polystream.cli._main import main

__all__ = ["main"]
