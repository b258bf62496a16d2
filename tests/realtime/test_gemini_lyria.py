"""Lyria RealTime's session: the commands' exact messages (checked against the
google-genai SDK's own types), the music as exact unified streams from the fixtures,
the reply a PAUSE or STOP ends, filtered prompts, unknown messages, bad input in strict
and tolerant mode, and the close codes typed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from google.genai import types

from polystream.dialects.gemini_lyria.binding import Session, close_error
from polystream.errors import LocalProtocolError, RemoteProtocolError
from polystream.events import (
    BlockEnd,
    BlockStart,
    DataDelta,
    ErrorEvent,
    ErrorInfo,
    Finish,
    FinishReason,
    MediaInfo,
    Raw,
    SessionUpdate,
    StreamStart,
    StreamWarning,
    Unknown,
)
from polystream.realtime import SOCKET_SPECS, endpoint, open_session

from .helpers import messages, payloads, run, where

MODEL = "models/lyria-realtime-exp"
IMPLICIT = {"implicit": True}
STEREO = MediaInfo(
    mime_type="audio/l16;rate=48000;channels=2", format="pcm", sample_rate=48000, channels=2
)
MONO_44K = MediaInfo(
    mime_type="audio/l16;rate=44100;channels=1", format="pcm", sample_rate=44100, channels=1
)
PAUSED = Finish(
    status="incomplete", reason=FinishReason(unified="cancelled", raw="PAUSE"), extra=IMPLICIT
)


def sdk_message(message: types.LiveMusicClientMessage) -> dict[str, Any]:
    """What the SDK would send for ``message`` (camelCase, no empty fields)."""
    dumped: dict[str, Any] = message.model_dump(mode="json", by_alias=True, exclude_none=True)
    return dumped


def opened() -> Session:
    session = open_session("gemini_lyria")
    assert isinstance(session, Session)
    session.configure(MODEL)
    return session


def test_the_spec() -> None:
    spec = SOCKET_SPECS["gemini_lyria"]
    assert spec.url == (
        "wss://generativelanguage.googleapis.com/ws/"
        "google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateMusic"
    )
    assert (spec.provider, spec.emulated, spec.answer) == ("gemini", True, "music")
    shake = endpoint("gemini_lyria", api_key="k", base_url="http://127.0.0.1:9/gemini")
    assert shake.url == (
        "ws://127.0.0.1:9/gemini/ws/"
        "google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateMusic"
    )
    assert shake.headers == {"x-goog-api-key": "k"}


def test_commands_are_the_sdk_s_messages() -> None:
    session = open_session("gemini_lyria", model="lyria-realtime-exp")
    out = session.configure(
        prompts=[("minimal techno", 1.0), {"text": "piano", "weight": 0.5}],
        temperature=1.1,
        top_k=40,
        seed=7,
        guidance=4.0,
        bpm=120,
        density=0.5,
        brightness=0.7,
        scale="D_MAJOR_B_MINOR",
        mute_bass=False,
        mute_drums=True,
        only_bass_and_drums=False,
        music_generation_mode="QUALITY",
    )
    setup = types.LiveMusicClientMessage(setup=types.LiveMusicClientSetup(model=MODEL))
    content = types.LiveMusicClientMessage(
        client_content=types.LiveMusicClientContent(
            weighted_prompts=[
                types.WeightedPrompt(text="minimal techno", weight=1.0),
                types.WeightedPrompt(text="piano", weight=0.5),
            ]
        )
    )
    config = types.LiveMusicClientMessage(
        music_generation_config=types.LiveMusicGenerationConfig(
            temperature=1.1,
            top_k=40,
            seed=7,
            guidance=4.0,
            bpm=120,
            density=0.5,
            brightness=0.7,
            scale=types.Scale.D_MAJOR_B_MINOR,
            mute_bass=False,
            mute_drums=True,
            only_bass_and_drums=False,
            music_generation_mode=types.MusicGenerationMode.QUALITY,
        )
    )
    assert [json.loads(m) for m in out] == [sdk_message(m) for m in (setup, content, config)]
    assert out[0] == '{"setup":{"model":"models/lyria-realtime-exp"}}'
    controls = session.play() + session.pause() + session.stop() + session.reset_context()
    assert controls == [
        '{"playbackControl":"PLAY"}',
        '{"playbackControl":"PAUSE"}',
        '{"playbackControl":"STOP"}',
        '{"playbackControl":"RESET_CONTEXT"}',
    ]
    for signal, sent in zip(("PLAY", "PAUSE", "STOP", "RESET_CONTEXT"), controls, strict=True):
        made = types.LiveMusicClientMessage(playback_control=types.LiveMusicPlaybackControl(signal))
        assert json.loads(sent) == sdk_message(made)
    assert session.send_text("jazz") == [
        '{"clientContent":{"weightedPrompts":[{"text":"jazz","weight":1.0}]}}',
        '{"playbackControl":"PLAY"}',
    ]
    assert session.cancel() == ['{"playbackControl":"PAUSE"}']
    assert session.create_response() == ['{"playbackControl":"PLAY"}']
    assert session.set_config(bpm=90, extra={"futureField": 1}) == [
        '{"musicGenerationConfig":{"bpm":90,"futureField":1}}'
    ]
    assert session.config == {"bpm": 90, "futureField": 1}


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.set_prompts([("a", 0)]), "weight must be a nonzero number"),
        (lambda s: s.set_prompts([]), "at least one weighted prompt"),
        (lambda s: s.set_prompts([("a", True)]), "weight must be a nonzero number"),
        (lambda s: s.set_config(scale="Z_MAJOR"), "unknown scale 'Z_MAJOR'"),
        (lambda s: s.set_config(music_generation_mode="LOUD"), "unknown music generation mode"),
        (lambda s: s.set_config(bpm=90.5), "bpm must be int"),
        (lambda s: s.set_config(tempo=90), "unknown music generation field 'tempo'"),
        (lambda s: s.control("REWIND"), "unknown playback control 'REWIND'"),
        (lambda s: s.configure(MODEL), "setup was sent already"),
    ],
)
def test_commands_the_service_refuses_are_local_errors(call: Any, message: str) -> None:
    with pytest.raises(LocalProtocolError) as caught:
        call(opened())
    assert message in caught.value.message and caught.value.dialect == "gemini_lyria"


def test_commands_need_setup_first() -> None:
    session = open_session("gemini_lyria")
    with pytest.raises(LocalProtocolError, match=r"configure\(model=\.\.\.\)"):
        session.play()
    with pytest.raises(LocalProtocolError, match="setup needs a model"):
        session.configure()


def test_the_music_exact_events() -> None:
    lines = messages("gemini_lyria", "music")
    p = payloads(lines)
    session = opened()
    session.play()
    chunk = [p[n]["serverContent"]["audioChunks"][0] for n in (1, 2, 4)]
    filtered = p[3]["filteredPrompt"]
    assert where(run(session, lines)) == [
        (0, None, None, SessionUpdate(status="created", model=MODEL, config={})),
        (1, None, None, StreamStart(dialect="gemini_lyria", model=MODEL, extra=IMPLICIT)),
        (1, None, None, BlockStart(index=0, kind="audio", media=STEREO, extra=IMPLICIT)),
        (
            1,
            None,
            None,
            DataDelta(
                index=0,
                delta="AAAAAGQAZACc/5z//38AgA==",
                mime_type=STEREO.mime_type,
                extra={"sourceMetadata": chunk[0]["sourceMetadata"]},
            ),
        ),
        (1, None, None, DataDelta(index=0, delta="AQD//wIA/v8=", mime_type=STEREO.mime_type)),
        (
            0,
            None,
            None,
            ErrorEvent(
                error=ErrorInfo(
                    kind="content_filter",
                    message="the prompt 'a song about violence' was filtered: "
                    "The prompt was blocked by the safety filter.",
                    code="filtered_prompt",
                    dialect="gemini_lyria",
                    raw=filtered,
                )
            ),
        ),
        # Another media type: the block ends, the next opens.
        (1, None, None, BlockEnd(index=0, extra=IMPLICIT)),
        (1, None, None, BlockStart(index=1, kind="audio", media=MONO_44K, extra=IMPLICIT)),
        (1, None, None, DataDelta(index=1, delta="BwAHAA==", mime_type=MONO_44K.mime_type)),
        (1, None, None, Unknown(name="goAway", data=lines[5])),
    ]
    assert session.setup_complete and session.filtered == [filtered]
    assert chunk[0]["sourceMetadata"]["musicGenerationConfig"] == {
        "bpm": 120,
        "scale": "C_MAJOR_A_MINOR",
    }
    # The connection closes while the music plays: the reply is cut.
    assert where(session.close()) == [
        (1, None, None, BlockEnd(index=1, extra=IMPLICIT)),
        (
            1,
            None,
            None,
            Finish(
                status="truncated",
                reason=FinishReason(unified="error"),
                error=ErrorInfo(
                    kind="truncated",
                    message="the connection closed while the music played",
                    retryable=True,
                    dialect="gemini_lyria",
                ),
                extra=IMPLICIT,
            ),
        ),
    ]


def test_a_pause_ends_the_reply_and_late_audio_belongs_to_none() -> None:
    lines = messages("gemini_lyria", "music")
    session = opened()
    session.play()
    assert [r.event for r in session.feed(lines[2])][:2] == [
        StreamStart(dialect="gemini_lyria", model=MODEL, extra=IMPLICIT),
        BlockStart(index=0, kind="audio", media=STEREO, extra=IMPLICIT),
    ]
    assert session.settle() == []  # (nothing ended yet: the reply runs on)
    assert session.pause() == ['{"playbackControl":"PAUSE"}']
    assert not session.playing
    # The reply's end comes at once when asked for ...
    assert where(session.settle()) == [
        (1, None, None, BlockEnd(index=0, extra=IMPLICIT)),
        (1, None, None, PAUSED),
    ]
    session.play()
    session.feed(lines[2])
    session.stop()
    # ... or with the next message: audio made before the service read the STOP.
    late = json.loads(lines[2])["serverContent"]["audioChunks"]
    stopped = FinishReason(unified="cancelled", raw="STOP")
    assert where(session.feed(lines[2])) == [
        (2, None, None, BlockEnd(index=0, extra=IMPLICIT)),
        (2, None, None, Finish(status="incomplete", reason=stopped, extra=IMPLICIT)),
        (
            0,
            None,
            None,
            StreamWarning(
                code="audio_after_pause",
                message="1 audio chunk(s) arrived after the music was paused or stopped: "
                "not part of any reply",
                extra={"audioChunks": late},
            ),
        ),
    ]
    # RESET_CONTEXT does not end the music; PLAY starts the next reply.
    session.play()
    session.reset_context()
    assert [(r.stream, type(r.event)) for r in session.feed(lines[2])] == [
        (3, StreamStart),
        (3, BlockStart),
        (3, DataDelta),
    ]
    session.pause()
    assert where(session.close()) == [
        (3, None, None, BlockEnd(index=0, extra=IMPLICIT)),
        (3, None, None, PAUSED),
    ]


def test_a_pause_before_settle_is_given_once_by_settle() -> None:
    session = opened()
    session.play()
    session.feed(messages("gemini_lyria", "music")[2])
    session.pause()
    assert len(session.settle()) == 2
    assert session.settle() == [] and session.close() == []


def test_binary_frames_and_url_safe_base64() -> None:
    session = opened()
    frame = (
        b'{"serverContent":{"audioChunks":[{"data":"_-8A",'
        b'"mimeType":"audio/l16;rate=48000;channels=2"}]}}'
    )
    events = [r.event for r in session.feed(frame)]
    assert events[2] == DataDelta(
        index=0, delta="/+8A", mime_type=STEREO.mime_type, extra={"data": "_-8A"}
    )


def test_raw_events_name_the_message_s_key() -> None:
    session = open_session("gemini_lyria", keep_raw=True)
    assert [r.event for r in session.feed('{"setupComplete":{}}')] == [
        Raw(dialect="gemini_lyria", data={"setupComplete": {}}, name="setupComplete"),
        SessionUpdate(status="created", config={}),
    ]


BAD = [
    ("[1]", "message is a JSON list, not an object"),
    ("{}", "message is an empty object"),
    ('{"serverContent":[]}', "serverContent is not an object"),
    ('{"serverContent":{"audioChunks":{}}}', "serverContent.audioChunks is not a list"),
    (
        '{"serverContent":{"audioChunks":[{"mimeType":"x"}]}}',
        "serverContent.audioChunks[0] has no string data",
    ),
    (
        '{"serverContent":{"audioChunks":[{"data":"AA==","mimeType":7}]}}',
        "serverContent.audioChunks[0].mimeType is not a string",
    ),
    ('{"filteredPrompt":"no"}', "filteredPrompt is not an object"),
]


@pytest.mark.parametrize(("line", "message"), BAD)
def test_bad_messages_tolerant(line: str, message: str) -> None:
    session = opened()
    session.feed('{"setupComplete":{}}')
    assert where(session.feed(line)) == [
        (
            0,
            None,
            None,
            ErrorEvent(
                error=ErrorInfo(
                    kind="protocol", message=message, dialect="gemini_lyria", event_index=1
                )
            ),
        )
    ]


@pytest.mark.parametrize(("line", "message"), [*BAD, ('{"goAway":{}}', "unknown message")])
def test_bad_messages_strict(line: str, message: str) -> None:
    session = open_session("gemini_lyria", strict=True)
    session.feed('{"setupComplete":{}}')
    with pytest.raises(RemoteProtocolError) as caught:
        session.feed(line)
    assert message in caught.value.message
    assert (caught.value.dialect, caught.value.event_index) == ("gemini_lyria", 1)


def test_malformed_json_is_located() -> None:
    session = open_session("gemini_lyria")
    out = session.feed("{nope")
    assert type(out[0].event) is ErrorEvent
    assert (out[0].event.error.kind, out[0].event.error.event_index) == ("protocol", 0)


@pytest.mark.parametrize(
    ("code", "reason", "kind", "retryable"),
    [
        (1007, "Request contains an invalid argument.", "invalid_request", False),
        (1008, "models/x is not found", "permission", False),
        (1011, "Internal error encountered.", "server", True),
        (1013, "", "overloaded", True),
        (None, "", "truncated", True),
        (4000, "", "unknown", False),
    ],
)
def test_close_codes_are_typed(code: int | None, reason: str, kind: str, retryable: bool) -> None:
    error = close_error(code, reason)
    shown = 1006 if code is None else code
    assert error == ErrorInfo(
        kind=kind,  # type: ignore[arg-type]
        message=f"the connection closed ({shown}{': ' + reason if reason else ''})",
        retryable=retryable,
        code=str(shown),
        dialect="gemini_lyria",
    )


def test_feed_after_close() -> None:
    session = opened()
    session.close()
    with pytest.raises(LocalProtocolError):
        session.feed('{"setupComplete":{}}')


# -- the event catalog ---------------------------------------------------------------------

COPY = Path(__file__).parents[1] / "fixtures" / "gemini_lyria" / "catalog_surfaces.json"
SHARED = Path("/work/shared/reference/event-catalog.json")
SURFACES: dict[str, list[str]] = json.loads(COPY.read_text())["surfaces"]


def test_the_copy_is_the_catalog_s() -> None:
    if not SHARED.exists():
        pytest.skip("the shared reference catalog is not beside this checkout")
    catalog = json.loads(SHARED.read_text())
    for surface, listed in SURFACES.items():
        assert sorted(e["name"] for e in catalog["events"] if e["surface"] == surface) == listed
    lyria = {e["surface"] for e in catalog["events"] if e["surface"].startswith("gemini.lyria")}
    assert lyria == set(SURFACES)


SERVER_SAMPLES = {
    "setupComplete": {},
    "serverContent": {"audioChunks": [{"data": "AAAAAA==", "mimeType": "audio/l16;rate=48000"}]},
    "filteredPrompt": {"text": "x", "filteredReason": "y"},
}


@pytest.mark.parametrize("name", SURFACES["gemini.lyria.server"])
def test_every_server_message_is_typed(name: str) -> None:
    out = opened().feed(json.dumps({name: SERVER_SAMPLES[name]}))
    assert out and not any(
        isinstance(r.event, Unknown | StreamWarning)
        or (isinstance(r.event, ErrorEvent) and r.event.error.kind == "protocol")
        for r in out
    )


@pytest.mark.parametrize("name", SURFACES["gemini.lyria.client"])
def test_every_client_message_is_a_command(name: str) -> None:
    session = open_session("gemini_lyria")
    made = {
        "setup": session.configure(MODEL),
        "clientContent": session.set_prompts("x"),
        "musicGenerationConfig": session.set_config(bpm=100),
        "playbackControl": session.play(),
    }[name]
    assert list(json.loads(made[0])) == [name]


@pytest.mark.parametrize("name", SURFACES["gemini.lyria.playback_control"])
def test_every_playback_control(name: str) -> None:
    session = opened()
    if name == "PLAYBACK_CONTROL_UNSPECIFIED":  # (unused, per the SDK: refused)
        with pytest.raises(LocalProtocolError):
            session.control(name)
    else:
        assert session.control(name) == [
            json.dumps({"playbackControl": name}, separators=(",", ":"))
        ]
