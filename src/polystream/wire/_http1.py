"""HTTP/1.1 framing that both HTTP shells apply alike: the server to the request heads
it reads, the client transport to the reply heads it reads."""

from __future__ import annotations

__all__ = ["open_head_size"]


def open_head_size(buffer: bytes | bytearray) -> int:
    """The least size of a head under way whose end is not in ``buffer`` yet: its bytes
    before the line ends that ``buffer`` ends with.

    Up to three of those (``\\r\\n\\r``) may be the beginning of the head's end, which a
    read can bring before the rest of it; a head's size never counts its end, so a head
    of the largest size is accepted however the reads cut it.
    """
    tail = buffer[-3:]
    return len(buffer) - len(tail) + len(tail.rstrip(b"\r\n"))
