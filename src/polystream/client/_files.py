"""The files a call uploads (a transcription's audio, an image edit's image): read from
what the caller gives, as the form metadata the request codecs take and the bytes the
call sends."""

from __future__ import annotations

import mimetypes
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeAlias

from polystream.errors import LocalProtocolError

__all__ = ["FileInput", "read_files"]

FileInput: TypeAlias = bytes | str | os.PathLike[str] | tuple[str, bytes] | tuple[str, bytes, str]
"""A file to upload: its bytes (named ``upload``), a path, or ``(filename, bytes)`` /
``(filename, bytes, content type)``."""


def _content_type(filename: str) -> str:
    guessed, _ = mimetypes.guess_type(filename)
    return guessed or "application/octet-stream"


def _one(field: str, given: FileInput) -> tuple[dict[str, Any], bytes]:
    if isinstance(given, bytes):
        filename, data, content_type = "upload", given, "application/octet-stream"
    elif isinstance(given, (str, os.PathLike)):
        path = Path(given)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise LocalProtocolError(f"cannot read the file for {field!r}: {exc}") from None
        filename, content_type = path.name, _content_type(path.name)
    elif isinstance(given, tuple) and len(given) in (2, 3):
        filename, data = given[0], given[1]
        content_type = given[2] if len(given) == 3 else _content_type(filename)
        if not isinstance(filename, str) or not isinstance(data, bytes):
            raise LocalProtocolError(f"file {field!r}: expected (filename, bytes[, content type])")
    else:
        raise LocalProtocolError(
            f"file {field!r}: expected bytes, a path or (filename, bytes[, content type])"
        )
    meta = {"filename": filename, "content_type": content_type, "size": len(data)}
    return meta, data


def read_files(files: Mapping[str, FileInput]) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The form metadata of ``files`` by field (for :attr:`Request.extra`) and their
    bytes by field (for the call).

    Raises:
        LocalProtocolError: A path that cannot be read, or a value of another shape.
    """
    fields: dict[str, Any] = {}
    data: dict[str, bytes] = {}
    for field, given in files.items():
        fields[field], data[field] = _one(field, given)
    return fields, data
