"""The HTTP/1.1 head rule the server and the client transport share."""

from __future__ import annotations

import pytest

from polystream.wire._http1 import open_head_size


@pytest.mark.parametrize(
    ("buffer", "size"),
    [
        (b"", 0),
        (b"GET / HTTP/1.1", 14),
        (b"GET / HTTP/1.1\r", 14),  # the beginning of a line end
        (b"GET / HTTP/1.1\r\n", 14),
        (b"GET / HTTP/1.1\r\nA: b\r\n\r", 20),  # the beginning of the head's end
        (b"GET / HTTP/1.1\nA: b\n", 19),
        (b"A: b\r\nC", 7),  # a line under way counts whole
        (b"\r\n\r", 0),
    ],
)
def test_open_head_size(buffer: bytes, size: int) -> None:
    assert open_head_size(buffer) == size
    assert open_head_size(bytearray(buffer)) == size
