"""WebSocket messages, sans-I/O: one message in, one JSON value out.

A WebSocket carries whole messages (the socket library has reassembled the frames), so
there is nothing to frame: what is left is to bound each message, parse its JSON once,
and say where a bad one was (its 0-based index among the messages read). Text messages
hold JSON; binary messages hold JSON too for some families (Gemini Live sends its JSON
in binary frames) and raw audio for others (xAI speech-to-text): the reader is told
which.
"""

from __future__ import annotations

from typing import Any, Final, Literal

import msgspec

from polystream.errors import BufferLimitExceeded, RemoteProtocolError
from polystream.wire.jsondepth import DEFAULT_MAX_DEPTH, too_deep

__all__ = [
    "DEFAULT_MAX_MESSAGE_SIZE",
    "MessageReader",
    "WSMessage",
    "dump_message",
]

DEFAULT_MAX_MESSAGE_SIZE: Final = 16 * 1024 * 1024
"""Largest message accepted, in characters (text) or bytes (binary): 16 MiB, above
OpenAI Realtime's 15 MiB limit on one audio append."""

_DECODER: Final = msgspec.json.Decoder()
_ENCODER: Final = msgspec.json.Encoder()


class WSMessage(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One message read.

    Fields:
        index: Its 0-based index among the messages the reader read.
        text: The JSON text (a binary JSON message decoded as UTF-8); None for binary
            data.
        value: The parsed JSON value (a ``dict`` for an object); None for binary data.
        data: The bytes of a binary data message; None otherwise.
    """

    index: int
    text: str | None = None
    value: Any = None
    data: bytes | None = None


class MessageReader:
    """Reads WebSocket messages one by one.

    Args:
        name: The protocol being read, named in errors (the dialect).
        max_message_size: See :data:`DEFAULT_MAX_MESSAGE_SIZE`.
        max_depth: Deepest JSON nesting accepted (see :mod:`polystream.wire.jsondepth`).
        binary: What a binary message holds: ``json`` (UTF-8 JSON) or ``data`` (bytes
            passed on as they are).
    """

    def __init__(
        self,
        *,
        name: str | None = None,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        max_depth: int = DEFAULT_MAX_DEPTH,
        binary: Literal["json", "data"] = "json",
    ) -> None:
        self.name = name
        self.max_message_size = max_message_size
        self.max_depth = max_depth
        self.binary = binary
        self.count = 0
        """How many messages were read (the next one's index)."""

    def read(self, message: str | bytes | bytearray | memoryview) -> WSMessage:
        """Read one whole message.

        Raises:
            BufferLimitExceeded: It is larger than ``max_message_size`` or its JSON
                nests deeper than ``max_depth``.
            RemoteProtocolError: A binary JSON message is not UTF-8, or the JSON is
                malformed.
        """
        index = self.count
        self.count += 1
        if len(message) > self.max_message_size:
            kind = "characters" if isinstance(message, str) else "bytes"
            raise self._error(
                BufferLimitExceeded,
                f"message of {len(message)} {kind} exceeds max_message_size="
                f"{self.max_message_size}",
                index,
            )
        if isinstance(message, str):
            text = message
        elif self.binary == "data":
            return WSMessage(index=index, data=bytes(message))
        else:
            try:
                text = bytes(message).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise self._error(
                    RemoteProtocolError, f"binary message is not UTF-8: {exc}", index
                ) from None
        at = too_deep(text, self.max_depth)
        if at is not None:
            raise self._error(
                BufferLimitExceeded,
                f"message nests deeper than max_depth={self.max_depth} (at character {at})",
                index,
            )
        try:
            value = _DECODER.decode(text)
        except msgspec.DecodeError as exc:
            raise self._error(
                RemoteProtocolError, f"malformed JSON message: {exc}", index
            ) from None
        return WSMessage(index=index, text=text, value=value)

    def _error(
        self, cls: type[RemoteProtocolError], message: str, index: int
    ) -> RemoteProtocolError:
        return cls(message, dialect=self.name, event_index=index)


def dump_message(value: Any) -> str:
    """A JSON value as a compact text message (the form every provider sends)."""
    return _ENCODER.encode(value).decode("utf-8")
