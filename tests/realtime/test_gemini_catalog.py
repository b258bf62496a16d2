"""Every name the event catalog lists for the Gemini Live socket is read as typed
(server keys, ``serverContent`` fields, turn-complete reasons) or written by a command
and served by the emulator (client keys, ``realtimeInput`` fields)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polystream.dialects.gemini_live import session as live_session
from polystream.dialects.gemini_live.wire import CLIENT_KEYS, FINISH_REASONS, SERVER_KEYS
from polystream.events import Unknown
from polystream.realtime import open_session

from .helpers import FIXTURES

COPY = FIXTURES / "gemini_live" / "catalog_surfaces.json"
SHARED = Path("/work/shared/reference/event-catalog.json")
SURFACES: dict[str, list[str]] = json.loads(COPY.read_text())["surfaces"]


def test_the_copy_is_the_catalog_s() -> None:
    if not SHARED.exists():
        pytest.skip("the shared reference catalog is not beside this checkout")
    catalog = json.loads(SHARED.read_text())
    for surface, listed in SURFACES.items():
        assert sorted(e["name"] for e in catalog["events"] if e["surface"] == surface) == listed


def test_server_keys_and_content_fields_are_typed() -> None:
    assert sorted(SERVER_KEYS) == SURFACES["gemini.live.server"]
    assert sorted(live_session._CONTENT_KEYS) == SURFACES["gemini.live.server_content"]
    for key in SURFACES["gemini.live.server"]:
        live = open_session("gemini_live", model="m", strict=True)
        assert not any(type(r.event) is Unknown for r in live.feed(json.dumps({key: {}})))


def test_every_turn_complete_reason_is_mapped() -> None:
    assert sorted(FINISH_REASONS) == SURFACES["gemini.live.turn_complete_reason"]


def test_client_keys() -> None:
    assert sorted(CLIENT_KEYS) == SURFACES["gemini.live.client"]
    live = open_session("gemini_live", model="m")
    written = [
        *live.send_text("a"),
        *live.send_text("a", realtime=True),
        *live.send_audio(b"\x00\x00"),
        *live.activity_start(),
        *live.activity_end(),
        *live.audio_stream_end(),
    ]
    keys = {next(iter(json.loads(m))) for m in written}
    assert keys == {"setup", "clientContent", "realtimeInput"}
    fields = {next(iter(json.loads(m)["realtimeInput"])) for m in written if "realtimeInput" in m}
    # (video and the deprecated mediaChunks have no command: send them as built.)
    assert fields == set(SURFACES["gemini.live.realtime_input"]) - {"video", "mediaChunks"}
