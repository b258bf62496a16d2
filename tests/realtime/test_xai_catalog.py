"""Every message name the event catalog lists for the three xAI voice sockets maps to a
typed unified event (or, from the client, is a command's message); none falls through
as an unknown pass-through or a protocol error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from polystream.dialects._realtime_api.wire import BETA_SERVER
from polystream.dialects.xai_realtime import wire as xai_wire
from polystream.dialects.xai_realtime.binding import Session as RealtimeSession
from polystream.dialects.xai_stt.binding import Session as STTSession
from polystream.dialects.xai_tts.binding import Session as TTSSession

from .helpers import FIXTURES
from .test_catalog import feed, realtime_message, realtime_prepare, typed

COPY = FIXTURES / "xai_realtime" / "catalog_surfaces.json"
SHARED = Path("/work/shared/reference/event-catalog.json")
SURFACES: dict[str, list[str]] = json.loads(COPY.read_text())["surfaces"]


def test_the_copy_is_the_catalog_s() -> None:
    if not SHARED.exists():
        pytest.skip("the shared reference catalog is not beside this checkout")
    catalog = json.loads(SHARED.read_text())
    for surface, listed in SURFACES.items():
        assert sorted(e["name"] for e in catalog["events"] if e["surface"] == surface) == listed
    assert sorted(SURFACES) == [
        "xai.realtime.client",
        "xai.realtime.server",
        "xai.stt.ws.client",
        "xai.stt.ws.server",
        "xai.tts.ws.client",
        "xai.tts.ws.server",
    ]


@pytest.mark.parametrize("name", SURFACES["xai.realtime.server"])
def test_every_realtime_server_message_is_typed(name: str) -> None:
    current = BETA_SERVER.get(name, name)
    assert current in xai_wire.SERVER_MESSAGES
    message = realtime_message(name)
    if name == "response.output_item.added":
        message["item"] = {"id": "it", "type": "message", "status": "in_progress", "content": []}
    if "text" in current and current.startswith("response.content_part"):
        message["part"] = {"type": "text", "text": ""}
    message["timestamp"] = 1766000000000
    out = feed(RealtimeSession(), *realtime_prepare(name), message)
    assert typed(out), [r.event for r in out]


@pytest.mark.parametrize("name", SURFACES["xai.realtime.client"])
def test_every_realtime_client_message_is_a_command(name: str) -> None:
    s = RealtimeSession()
    made = [
        *s.configure(),
        *s.send_text("hi"),
        *s.send_audio(b"\x00\x00"),
        *s.commit_audio(),
        *s.clear_audio(),
        *s.delete_item("i"),
        *s.truncate("i", 0),
        *s.cancel(),
        *s.force_message("hi"),
    ]
    assert name in xai_wire.CLIENT_MESSAGES
    assert name in {json.loads(m)["type"] for m in made if isinstance(m, str)}


TTS_MESSAGES: dict[str, dict[str, Any]] = {
    "audio.delta": {"type": "audio.delta", "delta": "AAAA"},
    "audio.done": {"type": "audio.done"},
    "audio.clear": {"type": "audio.clear"},
    "error": {"type": "error", "message": "m"},
}


@pytest.mark.parametrize("name", SURFACES["xai.tts.ws.server"])
@pytest.mark.parametrize("asked", [False, True])
def test_every_tts_server_message_is_typed(name: str, asked: bool) -> None:
    session = TTSSession()
    if asked:
        session.send_text("hi")
    assert typed(feed(session, TTS_MESSAGES[name]))


@pytest.mark.parametrize("name", SURFACES["xai.tts.ws.client"])
def test_every_tts_client_message_is_a_command(name: str) -> None:
    s = TTSSession()
    made = [*s.send_text("hi", flush=False), *s.flush(), *s.cancel()]
    assert name in {json.loads(m)["type"] for m in made}


STT_MESSAGES: dict[str, dict[str, Any]] = {
    "transcript.created": {"type": "transcript.created"},
    "transcript.partial": {
        "type": "transcript.partial",
        "text": "hi",
        "words": [{"text": "hi", "start": 0.0, "end": 0.2}],
        "is_final": True,
        "speech_final": True,
        "start": 0.0,
        "duration": 0.3,
        "channel_index": 0,
    },
    "transcript.done": {"type": "transcript.done", "text": "hi", "words": [], "duration": 0.3},
    "error": {"type": "error", "message": "m"},
}


@pytest.mark.parametrize("name", SURFACES["xai.stt.ws.server"])
@pytest.mark.parametrize("asked", [False, True])
def test_every_stt_server_message_is_typed(name: str, asked: bool) -> None:
    session = STTSession()
    if asked:
        session.commit_audio()
    assert typed(feed(session, STT_MESSAGES[name]))


@pytest.mark.parametrize("name", SURFACES["xai.stt.ws.client"])
def test_every_stt_client_message_is_a_command(name: str) -> None:
    s = STTSession()
    made = [*s.send_audio(b"\x00\x00"), *s.commit_audio()]
    if name == "<binary audio frame>":
        assert made[0] == b"\x00\x00"
    else:
        assert name in {json.loads(m)["type"] for m in made if isinstance(m, str)}
