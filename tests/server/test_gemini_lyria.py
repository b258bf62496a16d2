"""Lyria RealTime in the emulator: the sans-I/O server's playback semantics and its
close codes, the emulation's pacing in virtual time, and a conversation over loopback
read by polystream's own client (``polystream.realtime.connect``), the music's exact
bytes computed from the documented formula; a prompt a scenario filters."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import math
import struct
from collections.abc import Iterator
from typing import Any

import pytest

from polystream.dialects._realtime.server import Close, Refusal, Script, Turn
from polystream.dialects.gemini_lyria.binding import Server
from polystream.dialects.gemini_lyria.server import MusicRun
from polystream.events import (
    BlockEnd,
    BlockStart,
    DataDelta,
    ErrorEvent,
    ErrorInfo,
    Finish,
    FinishReason,
    MediaInfo,
    SessionUpdate,
    StreamStart,
)
from polystream.realtime import Routed, connect
from polystream.scenario import Emulator
from polystream.scenario._format import Faults, HttpError, Match, Scenario, Timing
from polystream.scenario._sockets import Send, SocketEmulation
from polystream.server import ServerThread

MODEL = "models/lyria-realtime-exp"
MIME = "audio/l16;rate=48000;channels=2"
SETUP = '{"setup":{"model":"models/lyria-realtime-exp"}}'
CHUNK = 48000  # frames per message: one second
ONE_KEY = (
    "a message must hold exactly one of setup, clientContent, musicGenerationConfig, "
    "playbackControl"
)


def expected(
    prompts: list[tuple[str, float]],
    start: int,
    frames: int,
    density: float | None = None,
    bpm: int | None = None,
) -> bytes:
    """The emulator's music as documented (docs/dialects/gemini_lyria.md)."""
    total = sum(abs(w) for _, w in prompts)
    peak = 12000 * (0.25 + 0.75 * (0.5 if density is None else density))
    out = []
    for n in range(start, start + frames):
        value = 0.0
        for text, weight in prompts:
            digest = hashlib.sha256(text.encode()).digest()
            freq = 110 + int.from_bytes(digest[:2], "big") % 660
            value += peak * weight / total * math.sin(2.0 * math.pi * (freq * n % 48000) / 48000)
        if bpm and (n * bpm // (60 * 48000)) % 2:
            value *= 0.5
        sample = max(-32768, min(32767, round(value)))
        out += [sample, sample]
    return struct.pack(f"<{len(out)}h", *out)


def chunk_of(message: str) -> dict[str, Any]:
    chunk: dict[str, Any] = json.loads(message)["serverContent"]["audioChunks"][0]
    return chunk


# -- the sans-I/O server -----------------------------------------------------------------


def replier(turn: Turn) -> Script | Refusal:
    if "forbidden" in turn.user_text:
        return Refusal(status=400, message="blocked")
    return Script(events=[], tag=turn)


def test_playback_controls() -> None:
    server = Server(replier)
    assert server.open() == []
    assert server.receive(SETUP) == ['{"setupComplete":{}}']
    prompts = {
        "weightedPrompts": [{"text": "calm piano", "weight": 2.0}, {"text": "rain", "weight": -1}]
    }
    assert server.receive(json.dumps({"clientContent": prompts})) == []
    assert server.receive('{"musicGenerationConfig":{"bpm":100,"density":0.2}}') == []
    (run,) = server.receive('{"playbackControl":"PLAY"}')
    assert isinstance(run, MusicRun)
    # The turn that times the music: the prompts' texts, a chunk's seconds.
    assert run.tag.user_text == "calm piano\nrain" and run.tag.pace == 1.0
    mix = [("calm piano", 2.0), ("rain", -1.0)]
    first = run.next()
    assert first is not None and first.audio
    chunk = chunk_of(first.text if isinstance(first.text, str) else "")
    assert chunk["mimeType"] == MIME
    assert base64.b64decode(chunk["data"]) == expected(mix, 0, CHUNK, 0.2, 100)
    assert chunk["sourceMetadata"] == {
        "clientContent": prompts,
        "musicGenerationConfig": {"bpm": 100, "density": 0.2},
    }
    # PLAY again while playing: nothing new.
    assert server.receive('{"playbackControl":"PLAY"}') == []
    # PAUSE, then PLAY: the music goes on from where it was.
    assert server.receive('{"playbackControl":"PAUSE"}') == []
    assert run.done and run.next() is None
    assert server.finished(run) == []
    (again,) = server.receive('{"playbackControl":"PLAY"}')
    assert isinstance(again, MusicRun) and again is not run
    second = again.next()
    assert second is not None and isinstance(second.text, str)
    assert base64.b64decode(chunk_of(second.text)["data"]) == expected(mix, CHUNK, CHUNK, 0.2, 100)
    # RESET_CONTEXT: from the beginning, without stopping; new prompts heard next.
    assert server.receive('{"playbackControl":"RESET_CONTEXT"}') == []
    assert (
        server.receive('{"clientContent":{"weightedPrompts":[{"text":"jazz","weight":1}]}}') == []
    )
    third = again.next()
    assert third is not None and isinstance(third.text, str)
    assert base64.b64decode(chunk_of(third.text)["data"]) == expected(
        [("jazz", 1)], 0, CHUNK, 0.2, 100
    )
    # STOP: ended, and the next PLAY starts the context again.
    assert server.receive('{"playbackControl":"STOP"}') == [] and again.done
    server.finished(again)
    (last,) = server.receive('{"playbackControl":"PLAY"}')
    assert isinstance(last, MusicRun)
    message = last.next()
    assert message is not None and isinstance(message.text, str)
    assert base64.b64decode(chunk_of(message.text)["data"]) == expected(
        [("jazz", 1)], 0, CHUNK, 0.2, 100
    )


def test_a_prompt_the_replier_refuses_is_filtered() -> None:
    server = Server(replier)
    server.receive(SETUP)
    prompts = [{"text": "forbidden noise", "weight": 1}, {"text": "piano", "weight": 1}]
    assert server.receive(json.dumps({"clientContent": {"weightedPrompts": prompts}})) == [
        '{"filteredPrompt":{"text":"forbidden noise","filteredReason":"blocked"}}'
    ]
    assert server.state.prompts == [{"text": "piano", "weight": 1}]


@pytest.mark.parametrize(
    ("messages", "close"),
    [
        (
            ['{"playbackControl":"PLAY"}'],
            Close(code=1007, reason="the first message must be setup, not playbackControl"),
        ),
        ([SETUP, SETUP], Close(code=1007, reason="setup was sent already")),
        (
            ['{"setup":{"model":"models/gemini-2.0-flash"}}'],
            Close(
                code=1008,
                reason="models/gemini-2.0-flash is not found for API version v1alpha, or is "
                "not supported for bidiGenerateMusic.",
            ),
        ),
        (
            [SETUP, '{"clientContent":{"weightedPrompts":[{"text":"a","weight":0}]}}'],
            Close(code=1007, reason="weightedPrompts[0].weight must not be 0"),
        ),
        (
            [SETUP, '{"musicGenerationConfig":{"scale":"Z"}}'],
            Close(code=1007, reason="Invalid value at 'music_generation_config.scale': Z"),
        ),
        (
            [SETUP, '{"musicGenerationConfig":{"tempo":1}}'],
            Close(code=1007, reason="Unknown name \"tempo\" at 'music_generation_config'."),
        ),
        (
            [SETUP, '{"musicGenerationConfig":{"bpm":"fast"}}'],
            Close(code=1007, reason="musicGenerationConfig.bpm: wrong type"),
        ),
        (
            [SETUP, '{"playbackControl":"REWIND"}'],
            Close(code=1007, reason="Invalid value at 'playback_control': 'REWIND'"),
        ),
        (
            [SETUP, '{"realtimeInput":{}}'],
            Close(code=1007, reason='Unknown name "realtimeInput": Cannot find field.'),
        ),
        (
            [SETUP, '{"a":1,"b":2}'],
            Close(
                code=1007,
                reason=ONE_KEY,
            ),
        ),
    ],
)
def test_errors_close_the_connection(messages: list[str], close: Close) -> None:
    server = Server(replier)
    out: list[Any] = []
    for message in messages:
        out = server.receive(message)
    assert out == [close]


def test_malformed_json_closes_1007() -> None:
    (close,) = Server(replier).receive("{nope")
    assert isinstance(close, Close) and close.code == 1007
    assert close.reason.startswith("Invalid JSON payload received.")
    assert len(close.reason.encode()) <= 123


def test_a_refused_play_closes_1011() -> None:
    server = Server(lambda turn: Refusal(status=500, message="no music today"))
    server.receive(SETUP)
    assert server.receive('{"playbackControl":"PLAY"}') == [
        Close(code=1011, reason="no music today")
    ]


# -- the emulation, in virtual time --------------------------------------------------------


def test_the_music_is_paced_in_real_time_by_default() -> None:
    emulation = SocketEmulation(Emulator(), "gemini_lyria", created=0)
    emulation.start(0.0)
    emulation.receive(SETUP, 0.0)
    assert emulation.due(0.0) == [Send(text='{"setupComplete":{}}')]
    emulation.receive('{"clientContent":{"weightedPrompts":[{"text":"piano","weight":1}]}}', 0.0)
    emulation.receive('{"playbackControl":"PLAY"}', 0.5)
    assert [len(s.text or "") > 0 for s in emulation.due(0.5)] == [True]
    assert emulation.wake == 1.5
    assert emulation.due(1.4) == []
    (second,) = emulation.due(1.5)
    assert isinstance(second.text, str)
    assert base64.b64decode(chunk_of(second.text)["data"]) == expected([("piano", 1)], CHUNK, CHUNK)
    emulation.receive('{"playbackControl":"PAUSE"}', 1.6)
    assert emulation.wake is None and emulation.due(10.0) == []


def test_a_scenario_times_the_music_and_an_error_closes() -> None:
    fast = Scenario(match=Match(dialect="gemini_lyria"), timing=Timing(speed=10.0))
    emulation = SocketEmulation(Emulator([fast]), "gemini_lyria")
    emulation.start(0.0)
    emulation.receive(SETUP, 0.0)
    emulation.receive('{"playbackControl":"PLAY"}', 0.0)
    assert len(emulation.due(0.25)) == 4  # setupComplete, then a chunk each 0.1 s
    emulation.receive('{"playbackControl":"STOP"}', 0.25)
    emulation.receive("[1]", 0.3)
    assert emulation.due(0.3) == [
        Send(
            close=1007,
            reason=ONE_KEY,
        )
    ]
    assert emulation.closed


# -- over loopback, with polystream's client ---------------------------------------------------

FILTER = Scenario(
    name="filter",
    match=Match(dialect="gemini_lyria", contains="violence"),
    faults=Faults(http_error=HttpError(status=400, message="The prompt was blocked.")),
)
FAST = Scenario(name="fast", match=Match(dialect="gemini_lyria"), timing=Timing(audio_delay=0.02))


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    with ServerThread(Emulator([FILTER, FAST])) as running:
        yield running


async def converse(server: ServerThread) -> list[Routed]:
    """Three prompts (one filtered), a configuration, PLAY; three chunks; PAUSE."""
    async with connect(
        "gemini_lyria",
        model=MODEL,
        api_key="g-test",
        base_url=server.base_url + "/gemini",
        idle_timeout=10,
    ) as conn:
        prompts = [("minimal techno", 1.0), ("a song about violence", 1.0), ("piano", 0.5)]
        await conn.command("set_prompts", prompts)
        await conn.command("set_config", bpm=120, density=0.8)
        await conn.command("play")
        got: list[Routed] = []
        async for routed in conn:
            got.append(routed)
            if sum(type(r.event) is DataDelta for r in got) == 3:
                break
        await conn.command("pause")
        got += await conn.close()
    return got


def test_a_conversation_over_loopback(server: ServerThread) -> None:
    got = asyncio.run(converse(server))
    mix = [("minimal techno", 1.0), ("piano", 0.5)]
    metadata = {
        "clientContent": {"weightedPrompts": [{"text": t, "weight": w} for t, w in mix]},
        "musicGenerationConfig": {"bpm": 120, "density": 0.8},
    }
    media = MediaInfo(mime_type=MIME, format="pcm", sample_rate=48000, channels=2)
    implicit = {"implicit": True}
    filtered = {"text": "a song about violence", "filteredReason": "The prompt was blocked."}
    assert [(r.stream, r.event) for r in got] == [
        (0, SessionUpdate(status="created", model=MODEL, config={})),
        (
            0,
            ErrorEvent(
                error=ErrorInfo(
                    kind="content_filter",
                    message="the prompt 'a song about violence' was filtered: "
                    "The prompt was blocked.",
                    code="filtered_prompt",
                    dialect="gemini_lyria",
                    raw=filtered,
                )
            ),
        ),
        (1, StreamStart(dialect="gemini_lyria", model=MODEL, extra=implicit)),
        (1, BlockStart(index=0, kind="audio", media=media, extra=implicit)),
        *[
            (
                1,
                DataDelta(
                    index=0,
                    delta=base64.b64encode(expected(mix, n * CHUNK, CHUNK, 0.8, 120)).decode(),
                    mime_type=MIME,
                    extra={"sourceMetadata": metadata},
                ),
            )
            for n in range(3)
        ],
        (1, BlockEnd(index=0, extra=implicit)),
        (
            1,
            Finish(
                status="incomplete",
                reason=FinishReason(unified="cancelled", raw="PAUSE"),
                extra=implicit,
            ),
        ),
    ]


def test_a_handshake_without_a_key_is_refused(server: ServerThread) -> None:
    from polystream.errors import APIStatusError

    conn = connect(
        "gemini_lyria",
        model=MODEL,
        api_key="g",
        base_url=server.base_url + "/gemini",
        headers={"x-goog-api-key": ""},
        reconnect=None,
    )
    with pytest.raises(APIStatusError) as caught:
        asyncio.run(conn.open())
    assert caught.value.status_code == 401


# -- a turn stopped after N seconds of its audio -------------------------------------------


def test_the_turn_counts_seconds_of_pcm() -> None:
    from polystream.realtime._turn import Turn as Reply

    reply = Reply("gemini_lyria")
    media = MediaInfo(mime_type=MIME, format="pcm", sample_rate=48000, channels=2)
    reply.feed(Routed(event=StreamStart(dialect="gemini_lyria"), stream=1))
    reply.feed(Routed(event=BlockStart(index=0, kind="audio", media=media), stream=1))
    for size in (19200, 1, 2):  # 0.1 s, then padded base64 of 1 and 2 bytes
        data = base64.b64encode(bytes(size)).decode()
        reply.feed(Routed(event=DataDelta(index=0, delta=data), stream=1))
    assert reply.audio_seconds == (19200 + 1 + 2) / 192000
    # Audio of no stated rate is not counted.
    reply.feed(Routed(event=BlockStart(index=1, kind="audio"), stream=1))
    reply.feed(Routed(event=DataDelta(index=1, delta="AAAA"), stream=1))
    assert reply.audio_seconds == (19200 + 1 + 2) / 192000


def test_text_turn_stops_after_the_seconds_asked(server: ServerThread) -> None:
    from polystream.realtime import text_turn

    result = asyncio.run(
        text_turn(
            "gemini_lyria",
            "minimal techno",
            model=MODEL,
            api_key="g-test",
            base_url=server.base_url + "/gemini",
            idle_timeout=10,
            seconds=1.5,
        )
    )
    assert (result.status, result.finish_reason) == (
        "incomplete",
        FinishReason(unified="cancelled", raw="PAUSE"),
    )
    audio = result.audio
    assert audio is not None
    assert (audio.data, audio.sample_rate, audio.channels, audio.format) == (
        expected([("minimal techno", 1.0)], 0, 2 * CHUNK),
        48000,
        2,
        "pcm",
    )
