"""``multipart/form-data`` bodies <-> the form dict the request codecs read.

OpenAI's transcription and image-edit endpoints take a multipart form, not JSON. Their
request codecs (``dialects/openai_transcription``, ``dialects/openai_images``) work on the
form as a dict: each text field under its name as its text (a field sent more than once,
such as ``include[]``, as the list of its values, in order), each file part under its
field name as its metadata only, ``{"filename": str, "content_type": str, "size": int}``.
This module turns a body into that dict plus the files' bytes, and back.

Parsing is done by ``python-multipart`` (the parser Starlette uses), which is part of the
``server`` extra; it is imported on first use.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import msgspec

__all__ = ["Form", "FormError", "decode_form", "encode_form", "is_form"]

MAX_PARTS = 256
"""The most parts a form may hold."""


class FormError(ValueError):
    """A body is not a well-formed ``multipart/form-data`` form."""


class Form(msgspec.Struct, kw_only=True):
    """A decoded form.

    Fields:
        fields: The form as the request codecs read it (text fields and file metadata).
        files: Each file part's bytes, by field name (the last part of a repeated name).
    """

    fields: dict[str, Any]
    files: dict[str, bytes]


def is_form(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` names a multipart form."""
    if not content_type:
        return False
    return content_type.split(";", 1)[0].strip().lower() == "multipart/form-data"


def decode_form(content_type: str, body: bytes, *, max_size: int = 64 << 20) -> Form:
    """Parse a ``multipart/form-data`` body.

    Args:
        content_type: The request's ``Content-Type`` (it carries the boundary).
        body: The whole body.
        max_size: The most bytes the body may hold.

    Raises:
        FormError: Not a multipart form, no boundary, a malformed body, a part without a
            name, more than :data:`MAX_PARTS` parts, or a body over ``max_size``.
    """
    from python_multipart.exceptions import MultipartParseError
    from python_multipart.multipart import MultipartParser, parse_options_header

    kind, options = parse_options_header(content_type)
    if kind != b"multipart/form-data":
        raise FormError(f"expected a multipart/form-data body, got {content_type!r}")
    boundary = options.get(b"boundary")
    if not boundary:
        raise FormError("the multipart/form-data Content-Type has no boundary")
    if len(body) > max_size:
        raise FormError(f"the form is {len(body)} bytes, over the limit of {max_size}")

    parts: list[tuple[dict[bytes, bytes], bytearray]] = []
    header_field = bytearray()
    header_value = bytearray()
    headers: dict[bytes, bytes] = {}
    data = bytearray()

    def on_part_begin() -> None:
        nonlocal headers, data
        headers = {}
        data = bytearray()

    def on_header_field(chunk: bytes, start: int, end: int) -> None:
        header_field.extend(chunk[start:end])

    def on_header_value(chunk: bytes, start: int, end: int) -> None:
        header_value.extend(chunk[start:end])

    def on_header_end() -> None:
        headers[bytes(header_field).lower()] = bytes(header_value)
        header_field.clear()
        header_value.clear()

    def on_part_data(chunk: bytes, start: int, end: int) -> None:
        data.extend(chunk[start:end])

    def on_part_end() -> None:
        if len(parts) >= MAX_PARTS:
            raise FormError(f"the form has more than {MAX_PARTS} parts")
        parts.append((headers, data))

    parser = MultipartParser(
        boundary,
        {
            "on_part_begin": on_part_begin,
            "on_header_field": on_header_field,
            "on_header_value": on_header_value,
            "on_header_end": on_header_end,
            "on_part_data": on_part_data,
            "on_part_end": on_part_end,
        },
    )
    try:
        parser.write(body)
        parser.finalize()
    except MultipartParseError as exc:
        raise FormError(f"malformed multipart/form-data body: {exc}") from None
    if not parts:
        raise FormError("the multipart/form-data body holds no parts")

    fields: dict[str, Any] = {}
    files: dict[str, bytes] = {}
    for number, (part_headers, part_data) in enumerate(parts):
        _, disposition = parse_options_header(part_headers.get(b"content-disposition", b""))
        raw_name = disposition.get(b"name")
        if raw_name is None:
            raise FormError(f"part {number} of the form has no name")
        name = raw_name.decode("utf-8", "replace")
        value: Any
        if b"filename" in disposition:
            content = bytes(part_data)
            files[name] = content
            value = {
                "filename": disposition[b"filename"].decode("utf-8", "replace"),
                "content_type": part_headers.get(b"content-type", b"application/octet-stream")
                .decode("latin-1")
                .strip(),
                "size": len(content),
            }
        else:
            try:
                value = bytes(part_data).decode("utf-8")
            except UnicodeDecodeError:
                raise FormError(f"form field {name!r} is not UTF-8 text") from None
        if name in fields:
            previous = fields[name]
            fields[name] = [*previous, value] if isinstance(previous, list) else [previous, value]
        else:
            fields[name] = value
    return Form(fields=fields, files=files)


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\r", " ").replace("\n", " ")


def encode_form(
    fields: Mapping[str, Any], files: Mapping[str, bytes], *, boundary: str | None = None
) -> tuple[str, bytes]:
    """Write a form dict (as :func:`decode_form` gives it) as a multipart body.

    Text fields are written as their text (JSON ``true`` / ``false`` / numbers as their
    JSON text), a list as one part per value, a file's metadata as a file part with the
    bytes from ``files``.

    Returns:
        The ``Content-Type`` (with its boundary) and the body.

    Raises:
        FormError: A file part's bytes are not in ``files``.
    """
    mark = boundary or os.urandom(16).hex()
    out = bytearray()
    for name, value in fields.items():
        for item in value if isinstance(value, list) else [value]:
            out += f"--{mark}\r\n".encode()
            if isinstance(item, dict) and "filename" in item:
                if name not in files:
                    raise FormError(f"no bytes for the file part {name!r}")
                out += (
                    f'Content-Disposition: form-data; name="{_quote(name)}"; '
                    f'filename="{_quote(str(item["filename"]))}"\r\n'
                    f"Content-Type: {item.get('content_type') or 'application/octet-stream'}"
                    "\r\n\r\n"
                ).encode()
                out += files[name]
            else:
                text = item if isinstance(item, str) else msgspec.json.encode(item).decode()
                out += f'Content-Disposition: form-data; name="{_quote(name)}"\r\n\r\n'.encode()
                out += text.encode()
            out += b"\r\n"
    out += f"--{mark}--\r\n".encode()
    return f"multipart/form-data; boundary={mark}", bytes(out)
