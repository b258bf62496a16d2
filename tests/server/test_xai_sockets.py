"""The emulator's four xAI WebSocket families under ``/xai/v1``, read by polystream's own
client (``polystream.realtime.connect`` / ``text_turn``) over loopback: the exact text
and transcripts, the tone's exact bytes at the rate and codec asked for, the Voice
Agent's binary audio frames, resumption, forced messages and keep-alives, and the
refusals. The official openai SDK's Realtime client reads the Voice Agent too."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Callable, Iterator
from typing import Any

import openai
import pytest

from polystream.audio import PCM16_16K, AudioFormat, alaw_encode, read_wav, ulaw_encode
from polystream.events import (
    BlockEnd,
    BlockStart,
    DataDelta,
    ErrorEvent,
    Finish,
    KeepAlive,
    Metadata,
    SessionUpdate,
    StatusUpdate,
    StreamStart,
    TextDelta,
    TranscriptSegment,
)
from polystream.realtime import AsyncConnection, Routed, connect, open_session, text_turn
from polystream.scenario import Emulator
from polystream.scenario._media import tone
from polystream.scenario._sockets import SocketEmulation
from polystream.server import ServerThread
from tests.server.support import track

VOICE = "grok-voice-latest"
SAID = f"Emulated reply from {VOICE}. You said: Hello"
KEY = "xai-test"


@pytest.fixture(scope="module")
def plain() -> Iterator[ServerThread]:
    with ServerThread(Emulator()) as server:
        yield server


def base(server: ServerThread) -> str:
    return server.base_url + "/xai/v1"


def opened(server: ServerThread, family: str, **options: Any) -> AsyncConnection:
    return connect(family, api_key=KEY, base_url=base(server), idle_timeout=10, **options)


async def read_until(
    conn: AsyncConnection, done: Callable[[Routed], bool], limit: int = 10_000
) -> list[Routed]:
    """The routed events up to the first for which ``done`` holds (included)."""
    out: list[Routed] = []
    async for routed in conn:
        out.append(routed)
        if done(routed) or len(out) >= limit:
            return out
    raise AssertionError("the connection ended first")


def finished(routed: Routed) -> bool:
    return type(routed.event) is Finish


def failed(routed: Routed) -> bool:
    return type(routed.event) is ErrorEvent


def session_said(status: str) -> Callable[[Routed], bool]:
    return lambda routed: type(routed.event) is SessionUpdate and routed.event.status == status


def audio_of(seen: list[Routed]) -> bytes:
    return b"".join(base64.b64decode(r.event.delta) for r in seen if type(r.event) is DataDelta)


# -- the Voice Agent (xai_realtime) ---------------------------------------------------------


def test_voice_agent_text_turn_is_the_spoken_reply(plain: ServerThread) -> None:
    seen: list[Routed] = []
    result = asyncio.run(
        text_turn(
            "xai_realtime",
            "Hello",
            model=VOICE,
            api_key=KEY,
            base_url=base(plain),
            idle_timeout=10,
            on_event=seen.append,
        )
    )
    assert (result.status, result.dialect) == ("completed", "xai_realtime")
    assert result.transcript is not None and result.transcript.text == SAID
    assert result.audio is not None
    assert result.audio.data == tone(SAID)  # PCM16 at 24 kHz, the session's default
    assert result.audio.sample_rate == 24000
    # conversation.created opens the connection, then the session in xAI's shape.
    session = [r.event for r in seen if r.stream == 0]
    assert type(session[0]) is StatusUpdate and session[0].status == "conversation.created"
    created = session[1]
    assert type(created) is SessionUpdate and created.status == "created"
    config = created.config
    assert config is not None and "type" not in config
    assert (config["voice"], config["turn_detection"]["type"]) == ("eve", "server_vad")
    assert config["audio"]["output"] == {
        "format": {"type": "audio/pcm", "rate": 24000},
        "speed": 1.0,
        "transport": "json",
    }
    assert config["resumption"] == {"enabled": False}


def test_binary_output_frames_at_16_khz(plain: ServerThread) -> None:
    pcm16k = {"type": "audio/pcm", "rate": 16000}

    async def main() -> tuple[list[Routed], Any]:
        async with opened(plain, "xai_realtime", model=VOICE) as conn:
            await conn.configure(
                turn_detection=None,
                audio={"output": {"format": pcm16k, "transport": "binary"}},
            )
            await conn.send_text("Hello")
            return await read_until(conn, finished), conn.session

    seen, session = asyncio.run(main())
    assert session.output_transport == "binary"
    deltas = [r.event for r in seen if type(r.event) is DataDelta]
    assert deltas and all(d.extra == {"transport": "binary"} for d in deltas)
    assert audio_of(seen) == tone(SAID, rate=16000)
    start = next(r.event for r in seen if type(r.event) is BlockStart and r.event.kind == "audio")
    assert start.media is not None and start.media.sample_rate == 16000
    text = "".join(r.event.delta for r in seen if type(r.event) is TextDelta)
    assert text == SAID


def test_binary_input_frames_are_the_input_audio(plain: ServerThread) -> None:
    # 50 ms of a tone at 16 kHz as a bytes message: too little to commit; 100 ms more is
    # enough.
    audio = tone("speech", seconds=0.15, rate=16000)
    committed = "input_audio_buffer.committed"

    def answer(routed: Routed) -> bool:
        event = routed.event
        return type(event) is ErrorEvent or (
            type(event) is StatusUpdate and event.status == committed
        )

    async def main() -> list[Routed]:
        async with opened(plain, "xai_realtime", model=VOICE) as conn:
            pcm = {"type": "audio/pcm", "rate": 16000}
            await conn.configure(
                turn_detection=None, audio={"input": {"format": pcm, "transport": "binary"}}
            )
            out: list[Routed] = []
            for part in (audio[:1600], audio[1600:]):
                messages = conn.session.send_audio(part)
                assert messages == [part]  # (bytes, not input_audio_buffer.append)
                await conn.send(messages)
                await conn.command("commit_audio")
                out.append((await read_until(conn, answer))[-1])
            return out

    too_little, enough = asyncio.run(main())
    assert type(too_little.event) is ErrorEvent
    assert too_little.event.error.code == "input_audio_buffer_commit_empty"
    assert too_little.event.error.message == (
        "Error committing input audio buffer: buffer too small. Expected at least 100ms of "
        "audio, but buffer only has 50.00ms of audio."
    )
    assert type(enough.event) is StatusUpdate and enough.event.status == committed


def test_resumption_is_answered_with_the_conversation_id(plain: ServerThread) -> None:
    async def main() -> tuple[list[Routed], Any]:
        async with opened(plain, "xai_realtime", model=VOICE) as conn:
            await conn.configure(resumption=True)
            return await read_until(conn, session_said("updated")), conn.session

    seen, session = asyncio.run(main())
    opening = seen[0].event
    assert type(opening) is StatusUpdate
    conversation = opening.extra["conversation"]
    assert conversation["object"] == "realtime.conversation"
    assert conversation["id"].startswith("conv_")
    updated = seen[-1].event
    assert type(updated) is SessionUpdate and updated.config is not None
    assert updated.config["resumption"] == {"enabled": True, "conversation_id": conversation["id"]}
    assert session.resumption is True
    assert session.conversation_id == conversation["id"]


def test_a_forced_message_is_said_verbatim(plain: ServerThread) -> None:
    async def main() -> list[Routed]:
        async with opened(plain, "xai_realtime", model=VOICE) as conn:
            await conn.command("force_message", "Please hold.", voice="rex")
            return await read_until(conn, finished)

    seen = asyncio.run(main())
    said = "".join(r.event.delta for r in seen if type(r.event) is TextDelta)
    assert said == "Please hold."
    assert audio_of(seen) == tone("Please hold.")
    done = seen[-1].event
    assert type(done) is Finish and done.status == "completed"
    response = done.extra["response"]
    assert response["audio"]["output"]["voice"] == "rex"


def test_voice_agent_refusals(plain: ServerThread) -> None:
    async def main() -> list[Routed]:
        async with opened(plain, "xai_realtime", model=VOICE) as conn:
            await conn.send(b"\x00\x00")  # (binary audio, with the JSON transport)
            await conn.configure(audio={"output": {"format": {"type": "audio/pcm", "rate": 4000}}})
            await conn.send('{"type":"conversation.item.retrieve","item_id":"x"}')
            return [(await read_until(conn, failed))[-1] for _ in range(3)]

    errors = [r.event.extra["error"] for r in asyncio.run(main()) if type(r.event) is ErrorEvent]
    assert [(e["code"], e["param"]) for e in errors] == [
        ("invalid_value", None),
        ("invalid_value", "session.audio.output.format.rate"),
        ("invalid_value", "type"),
    ]
    assert errors[0]["message"] == (
        "A binary message is input audio only with audio.input.transport 'binary'."
    )
    assert errors[1]["message"] == "Invalid value: 4000. Supported values are: 8000 to 48000."
    assert errors[2]["message"] == (  # (xAI's 9 client messages)
        "Invalid value: 'conversation.item.retrieve'. Supported values are: 'session.update', "
        "'input_audio_buffer.append', 'input_audio_buffer.commit', 'input_audio_buffer.clear', "
        "'conversation.item.create', 'conversation.item.truncate', 'conversation.item.delete', "
        "'response.create', 'response.cancel'."
    )


def test_ping_every_15_seconds_read_as_keepalives() -> None:
    emulation = SocketEmulation(Emulator(), "xai_realtime", query={"model": VOICE}, created=1_000)
    emulation.start(0.0)
    opening = [json.loads(s.text) for s in emulation.due(0.0) if isinstance(s.text, str)]
    assert [m["type"] for m in opening] == ["conversation.created", "session.created"]
    assert emulation.wake == 15.0
    assert emulation.due(14.9) == []
    pings = [json.loads(s.text) for s in emulation.due(30.0) if isinstance(s.text, str)]
    assert [(m["type"], m["timestamp"]) for m in pings] == [
        ("ping", 1_015_000),
        ("ping", 1_030_000),
    ]
    session = open_session("xai_realtime", strict=True)
    events = [r.event for m in pings for r in session.feed(json.dumps(m))]
    assert [(type(e), e.name) for e in events] == [(KeepAlive, "ping"), (KeepAlive, "ping")]


def test_server_vad_hears_binary_audio_at_16_khz() -> None:
    emulation = SocketEmulation(Emulator(), "xai_realtime", query={"model": VOICE}, created=0)
    emulation.start(0.0)
    emulation.due(0.0)

    def update(session: dict[str, Any]) -> dict[str, Any]:
        emulation.receive(json.dumps({"type": "session.update", "session": session}), 0.0)
        sent = emulation.due(0.0)
        assert len(sent) == 1 and isinstance(sent[0].text, str)
        updated: dict[str, Any] = json.loads(sent[0].text)["session"]
        return updated

    pcm16k = {"type": "audio/pcm", "rate": 16000}
    update({"audio": {"input": {"format": pcm16k, "transport": "binary"}}})
    # 300 ms of a tone, then 600 ms of silence: speech from 0 (less the 333 ms padding),
    # stopped once 500 ms of silence followed it.
    emulation.receive(tone("hi", seconds=0.3, rate=16000) + bytes(2 * 9600), 0.0)
    heard = [json.loads(s.text) for s in emulation.due(0.0) if isinstance(s.text, str)]
    assert [(m["type"], m.get("audio_start_ms"), m.get("audio_end_ms")) for m in heard[:3]] == [
        ("input_audio_buffer.speech_started", 0, None),
        ("input_audio_buffer.speech_stopped", None, 800),
        ("input_audio_buffer.committed", None, None),
    ]
    assert heard[-1]["type"] == "response.done"
    assert heard[-1]["response"]["status"] == "completed"
    # {"type": null} turns detection off: the same audio is only written.
    assert update({"turn_detection": {"type": None}})["turn_detection"] is None
    emulation.receive(tone("hi", seconds=0.3, rate=16000) + bytes(2 * 9600), 0.0)
    assert emulation.due(0.0) == []


def test_the_openai_sdk_reads_the_voice_agent(plain: ServerThread) -> None:
    client = track(openai.OpenAI(api_key=KEY, base_url=base(plain), max_retries=0))
    with client.realtime.connect(model=VOICE) as conn:
        conn.session.update(session={"type": "realtime", "instructions": "Be brief."})
        conn.conversation.item.create(
            item={
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": "Hello"}],
            }
        )
        conn.response.create()
        kinds, audio, transcript = [], b"", ""
        for event in conn:
            kinds.append(event.type)
            if event.type == "response.output_audio.delta":
                audio += base64.b64decode(event.delta)
            elif event.type == "response.output_audio_transcript.delta":
                transcript += event.delta
            elif event.type == "response.done":
                status = event.response.status
                break
    assert kinds[:3] == ["conversation.created", "session.created", "session.updated"]
    assert "rate_limits.updated" not in kinds
    assert (transcript, audio, status) == (SAID, tone(SAID), "completed")


# -- the Responses WebSocket (xai_responses_ws) -----------------------------------------


def test_responses_socket_turns_are_xai_responses_streams(plain: ServerThread) -> None:
    async def main() -> list[Routed]:
        async with opened(plain, "xai_responses_ws", model="grok-4.3") as conn:
            await conn.send_text("Hello")
            first = await read_until(conn, finished)
            previous = conn.session.last_response_id(None)
            await conn.command("send_text", "Again", previous_response_id=previous)
            return first + await read_until(conn, finished)

    seen = asyncio.run(main())
    starts = [r.event for r in seen if type(r.event) is StreamStart]
    assert [(s.dialect, s.model) for s in starts] == [("xai_responses", "grok-4.3")] * 2
    assert all(s.id is not None and s.id.startswith("resp_") for s in starts)
    texts = {
        stream: "".join(
            r.event.delta for r in seen if r.stream == stream and type(r.event) is TextDelta
        )
        for stream in (1, 2)
    }
    assert texts == {
        1: "Emulated reply from grok-4.3. You said: Hello",
        2: "Emulated reply from grok-4.3. You said: Again",
    }
    assert [r.event.status for r in seen if type(r.event) is Finish] == ["completed"] * 2


def test_responses_socket_text_turn(plain: ServerThread) -> None:
    result = asyncio.run(
        text_turn(
            "xai_responses_ws",
            "Hello",
            model="grok-4.3",
            api_key=KEY,
            base_url=base(plain),
            idle_timeout=10,
        )
    )
    assert (result.text, result.status) == (
        "Emulated reply from grok-4.3. You said: Hello",
        "completed",
    )


# -- text to speech (xai_tts) ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "encode"),
    [
        ({"codec": "pcm", "sample_rate": 16000}, lambda pcm: pcm),
        ({"codec": "mulaw", "sample_rate": 8000}, ulaw_encode),
        ({"codec": "alaw", "sample_rate": 8000}, alaw_encode),
    ],
)
def test_speech_is_the_tone_of_the_text(
    plain: ServerThread, options: dict[str, Any], encode: Callable[[bytes], bytes]
) -> None:
    seen: list[Routed] = []
    result = asyncio.run(
        text_turn(
            "xai_tts",
            "Hello there",
            api_key=KEY,
            base_url=base(plain),
            idle_timeout=10,
            session_options={**options, "language": "en"},
            on_event=seen.append,
        )
    )
    rate = options["sample_rate"]
    assert (result.status, result.dialect) == ("completed", "xai_tts")
    assert result.audio is not None
    assert result.audio.data == encode(tone("Hello there", rate=rate))
    assert result.audio.sample_rate == rate
    assert [type(r.event) for r in seen] == [
        StreamStart,
        BlockStart,
        *[DataDelta] * (len(result.audio.data) // 4800 + 1),
        BlockEnd,
        Finish,
    ]


def test_speech_as_one_wav_file_and_utterances_in_order(plain: ServerThread) -> None:
    async def main() -> list[Routed]:
        async with opened(plain, "xai_tts", session_options={"codec": "wav"}) as conn:
            await conn.send_text("One")
            await conn.send_text("Two, three")
            out = await read_until(conn, finished)
            return out + await read_until(conn, finished)

    seen = asyncio.run(main())
    files = {
        stream: b"".join(
            base64.b64decode(r.event.delta)
            for r in seen
            if r.stream == stream and type(r.event) is DataDelta
        )
        for stream in (1, 2)
    }
    for stream, text in ((1, "One"), (2, "Two, three")):
        fmt, pcm = read_wav(files[stream])
        assert (fmt, pcm) == (AudioFormat("pcm16", 24000), tone(text))


def test_speech_clear_and_bad_queries(plain: ServerThread) -> None:
    async def cleared() -> list[Routed]:
        async with opened(plain, "xai_tts") as conn:
            await conn.command("cancel")
            return await read_until(conn, lambda r: type(r.event) is StatusUpdate)

    assert [(r.stream, r.event.status) for r in asyncio.run(cleared())] == [(0, "audio.clear")]

    async def refused(options: dict[str, Any]) -> ErrorEvent:
        async with opened(plain, "xai_tts", session_options=options) as conn:
            seen = await read_until(conn, failed)
            event = seen[-1].event
            assert type(event) is ErrorEvent
            return event

    mp3 = asyncio.run(refused({"codec": "mp3"}))
    assert mp3.error.message == "Invalid codec 'mp3': the emulator writes pcm, wav, mulaw, alaw."
    fast = asyncio.run(refused({"codec": "pcm", "sample_rate": 96000}))
    assert fast.error.message == "Invalid sample_rate '96000': 8000 to 48000."


# -- speech to text (xai_stt) ----------------------------------------------------------------


def test_transcript_interim_then_final_then_done(plain: ServerThread) -> None:
    async def main() -> list[Routed]:
        options = {"input": PCM16_16K, "interim_results": True}
        async with opened(plain, "xai_stt", session_options=options) as conn:
            await conn.send(conn.session.send_audio(b"\x00\x00" * 24000, chunk_ms=100))
            await conn.command("commit_audio")
            first = await read_until(conn, finished)
            await conn.send(conn.session.send_audio(b"\x00\x00" * 8000))
            await conn.command("commit_audio")
            return first + await read_until(conn, finished)

    seen = asyncio.run(main())
    created = seen[0].event
    assert type(created) is SessionUpdate and created.status == "created"
    assert created.input_audio is not None and created.input_audio.sample_rate == 16000
    first = "Emulated transcript of 1.50 s of audio."
    words = first.split(" ")
    interim = [r.event.value for r in seen if r.stream == 1 and type(r.event) is Metadata]
    assert interim == [" ".join(words[: n + 1]) for n in range(len(words))]
    final = [r.event for r in seen if r.stream == 1 and type(r.event) is TranscriptSegment]
    assert [(s.text, s.start, s.end) for s in final] == [(first, 0.0, 1.5)]
    done = [r.event for r in seen if type(r.event) is Finish]
    assert [(f.status, f.extra) for f in done] == [
        ("completed", {"type": "transcript.done", "text": "", "duration": 1.5}),
        ("completed", {"type": "transcript.done", "text": "", "duration": 0.5}),
    ]
    second = [r.event for r in seen if r.stream == 2 and type(r.event) is TranscriptSegment]
    assert [(s.text, s.start, s.end) for s in second] == [
        ("Emulated transcript of 0.50 s of audio.", 1.5, 2.0)
    ]


def test_transcript_is_the_scenario_text(serve: Callable[..., ServerThread]) -> None:
    server = serve([{"match": {"dialect": "xai_stt"}, "reply": {"text": "Hello world"}}])

    async def main() -> list[Routed]:
        async with opened(
            server, "xai_stt", session_options={"encoding": "mulaw", "sample_rate": 8000}
        ) as conn:
            await conn.send(conn.session.send_audio(b"\xff" * 800))
            await conn.command("commit_audio")
            return await read_until(conn, finished)

    seen = asyncio.run(main())
    text = "".join(r.event.delta for r in seen if type(r.event) is TextDelta)
    assert text == "Hello world"
    assert [type(r.event) for r in seen if type(r.event) is Metadata] == []  # (no interim)
    segment = next(r.event for r in seen if type(r.event) is TranscriptSegment)
    assert segment.extra == {"implicit": True}
    words = next(r.event for r in seen if type(r.event) is TextDelta).extra["words"]
    assert words == [
        {"word": "Hello", "start": 0.0, "end": 0.05},
        {"word": "world", "start": 0.05, "end": 0.1},
    ]


def test_a_turn_without_audio_and_a_bad_rate(plain: ServerThread) -> None:
    async def empty() -> list[Routed]:
        async with opened(plain, "xai_stt") as conn:
            await conn.command("commit_audio")
            return await read_until(conn, finished)

    seen = [r for r in asyncio.run(empty()) if r.stream == 1]
    assert [type(r.event) for r in seen] == [StreamStart, Finish]

    async def refused() -> ErrorEvent:
        async with opened(
            plain, "xai_stt", session_options={"sample_rate": 16000}, query={"sample_rate": "12345"}
        ) as conn:
            seen = await read_until(conn, failed)
            event = seen[-1].event
            assert type(event) is ErrorEvent
            return event

    message = asyncio.run(refused()).error.message
    assert message == "Invalid sample_rate '12345': one of 8000, 16000, 22050, 24000, 44100, 48000."


def test_speech_faults_are_error_messages(serve: Callable[..., ServerThread]) -> None:
    server = serve(
        [
            {"match": {"dialect": "xai_tts"}, "faults": {"http_error": {"status": 429}}},
            {
                "match": {"dialect": "xai_stt"},
                "reply": {"text": "a b c"},
                "faults": {"error": {"after": 1, "message": "Overloaded", "kind": "server"}},
            },
        ]
    )
    tts = asyncio.run(
        text_turn("xai_tts", "Hi", api_key=KEY, base_url=base(server), idle_timeout=10)
    )
    assert tts.status == "failed" and tts.error is not None
    assert tts.error.message == (
        "Rate limit exceeded. Please retry after the time given in Retry-After."
    )

    async def stt() -> list[Routed]:
        options = {"interim_results": True}
        async with opened(server, "xai_stt", session_options=options) as conn:
            await conn.send(conn.session.send_audio(b"\x00\x00" * 1600))
            await conn.command("commit_audio")
            return await read_until(conn, finished)

    seen = asyncio.run(stt())
    end = seen[-1].event
    assert type(end) is Finish and end.status == "failed"
    assert end.error is not None and end.error.message == "Overloaded"
    interim = [r.event.value for r in seen if type(r.event) is Metadata]
    assert interim == ["a"]


def test_every_xai_family_is_emulated() -> None:
    from polystream.realtime import SOCKET_SPECS

    xai = {name: spec for name, spec in SOCKET_SPECS.items() if spec.provider == "xai"}
    assert {name: (spec.emulated, spec.answer) for name, spec in xai.items()} == {
        "xai_responses_ws": (True, "reply"),
        "xai_realtime": (True, "reply"),
        "xai_tts": (True, "speech"),
        "xai_stt": (True, "transcript"),
    }
