"""WebSocket messages: one JSON value per message, bounded, located by index."""

from __future__ import annotations

import pytest

from polystream.errors import BufferLimitExceeded, RemoteProtocolError
from polystream.wire.ws import MessageReader, WSMessage, dump_message


def test_text_and_binary_json_messages_are_indexed() -> None:
    reader = MessageReader(name="fam")
    assert reader.read('{"type":"a","n":[1,2]}') == WSMessage(
        index=0, text='{"type":"a","n":[1,2]}', value={"type": "a", "n": [1, 2]}
    )
    assert reader.read('{"t":"é"}'.encode()) == WSMessage(
        index=1, text='{"t":"é"}', value={"t": "é"}
    )
    assert reader.read(memoryview(b"[]")) == WSMessage(index=2, text="[]", value=[])
    assert reader.count == 3


def test_binary_data_messages_pass_through() -> None:
    reader = MessageReader(binary="data")
    assert reader.read(b"\x00\xff") == WSMessage(index=0, data=b"\x00\xff")
    assert reader.read('{"a":1}') == WSMessage(index=1, text='{"a":1}', value={"a": 1})


def test_errors_are_typed_and_located() -> None:
    reader = MessageReader(name="fam", max_message_size=16, max_depth=3)
    reader.read("{}")
    with pytest.raises(RemoteProtocolError, match="malformed JSON message") as caught:
        reader.read("{oops")
    assert (caught.value.dialect, caught.value.event_index, caught.value.byte_offset) == (
        "fam",
        1,
        None,
    )
    with pytest.raises(
        BufferLimitExceeded, match="17 characters exceeds max_message_size=16"
    ) as big:
        reader.read('{"a":"0123456789"}'[:17])
    assert big.value.event_index == 2
    with pytest.raises(BufferLimitExceeded, match="18 bytes"):
        reader.read(b'{"a":"0123456789"}')
    with pytest.raises(BufferLimitExceeded, match="deeper than max_depth=3 \\(at character 3\\)"):
        reader.read("[[[[]]]]")
    with pytest.raises(RemoteProtocolError, match="not UTF-8") as bad:
        reader.read(b"\xff\xfe")
    assert bad.value.event_index == 5
    assert reader.count == 6


def test_dump_message_is_compact_utf8_json() -> None:
    assert dump_message({"type": "x", "text": "é", "n": None}) == '{"type":"x","text":"é","n":null}'
