"""What the subcommands share: reading the input in bounded chunks, writing JSON lines,
the exit statuses, and the error line."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import IO, Any, Final

import msgspec

__all__ = [
    "CHUNK_SIZE",
    "EXIT_INVALID",
    "EXIT_OK",
    "EXIT_USAGE",
    "fail",
    "read_chunks",
    "write_json_line",
]

CHUNK_SIZE: Final = 64 * 1024
EXIT_OK: Final = 0
EXIT_INVALID: Final = 1
EXIT_USAGE: Final = 2

_json = msgspec.json.Encoder()


def read_chunks(path: str) -> Iterator[bytes]:
    """Yield the input in chunks, so that huge inputs fail fast and stay bounded."""
    if path == "-":
        stream: IO[bytes] = sys.stdin.buffer
        while (
            chunk := stream.read1(CHUNK_SIZE)
            if hasattr(stream, "read1")
            else stream.read(CHUNK_SIZE)
        ):
            yield chunk
        return
    with open(path, "rb") as handle:
        while chunk := handle.read(CHUNK_SIZE):
            yield chunk


def write_json_line(out: IO[bytes], value: Any) -> None:
    """Write ``value`` as one line of JSON."""
    out.write(_json.encode(value) + b"\n")


def fail(message: str) -> int:
    """Print the error line (after what stdout holds) and give the invalid-input status."""
    sys.stdout.flush()
    print(f"polystream: error: {message}", file=sys.stderr)
    return EXIT_INVALID
