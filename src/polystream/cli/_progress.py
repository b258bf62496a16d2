"""A progress bar on stderr while a long input is read (``decode``, ``convert``)."""

from __future__ import annotations

import os
import stat
import sys
from collections.abc import Iterator
from typing import Final, TextIO

from polystream.cli._io import read_chunks

__all__ = ["PROGRESS_BYTES", "progress_chunks", "shows_progress"]

PROGRESS_BYTES: Final = 8 * 1024 * 1024
"""Inputs larger than this (8 MiB) show a progress bar."""


def _size(path: str) -> int | None:
    """The size of the input, when it is a regular file (stdin included)."""
    try:
        info = os.fstat(sys.stdin.fileno()) if path == "-" else os.stat(path)
    except (OSError, ValueError, AttributeError):
        return None  # (a missing file fails when read; a stdin without a descriptor)
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def shows_progress(path: str, err: TextIO, *, stdout_busy: bool) -> int | None:
    """The size of the input when a bar is to be shown for it, else None: the input is
    a file larger than :data:`PROGRESS_BYTES`, stderr is a terminal, and stdout is not
    that terminal too while it is written to (``stdout_busy``: the bar would tear the
    lines apart)."""
    if not err.isatty() or (stdout_busy and sys.stdout.isatty()):
        return None
    size = _size(path)
    return size if size is not None and size > PROGRESS_BYTES else None


def progress_chunks(
    path: str, verb: str, *, stdout_busy: bool = True, err: TextIO | None = None
) -> Iterator[bytes]:
    """:func:`~polystream.cli._io.read_chunks`, with a progress bar on ``err``
    (stderr) when :func:`shows_progress` says so; the bar is gone once the input is
    read."""
    err = sys.stderr if err is None else err
    size = shows_progress(path, err, stdout_busy=stdout_busy)
    if size is None:
        yield from read_chunks(path)
        return
    try:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            DownloadColumn,
            Progress,
            TextColumn,
            TimeRemainingColumn,
            TransferSpeedColumn,
        )
    except ImportError:  # (rich comes with the server extra)
        yield from read_chunks(path)
        return
    name = "stdin" if path == "-" else os.path.basename(path)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(binary_units=True),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(file=err),
        transient=True,
        redirect_stdout=False,
        redirect_stderr=False,
    ) as progress:
        task = progress.add_task(f"{verb} {name}", total=size)
        for chunk in read_chunks(path):
            yield chunk
            progress.advance(task, len(chunk))
