"""The official google-genai SDK's Live client (``client.aio.live.connect``) against the
emulator over WSS (the SDK opens ``wss://`` whenever it has an API key: the emulator
serves TLS with a local authority, trusted through ``SSL_CERT_FILE``): text and spoken
turns, transcriptions, tool calls, a reply interrupted by ``activityStart`` (barge-in:
``interrupted``, ``turnComplete``, no ``generationComplete``; the conversation keeps
what was said), resumption by handle, ``goAway`` (the deadline, and a session resumed on
a new connection after it with the last handle), ephemeral tokens minted by
``client.aio.auth_tokens.create`` and the constrained endpoint, and a refusal as a close
code."""

from __future__ import annotations

import asyncio
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google import genai
from google.genai import errors as genai_errors
from google.genai import types

from polystream.scenario import Emulator, parse_scenarios
from polystream.scenario._media import tone
from polystream.server import ServerThread

MODEL = "gemini-live-2.5-flash-preview"
SHORT = "gemini-live-short"
BRIEF = "gemini-live-brief"
SAID = f"Emulated reply from {MODEL}. You said: Hello"
COUNTING = ["One, ", "two, ", "three, ", "four, ", "five."]
SCENARIOS = [
    {
        # Three deltas at once, then a minute between the others: the client speaks
        # over the reply after the third, long before a fourth is due.
        "match": {"contains": "Count slowly"},
        "reply": {"text": COUNTING},
        "timing": {"recorded": [0, 0, 0], "delay": 60.0},
    },
    {
        "match": {"contains": "weather", "tool_result": False},
        "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
    },
    {"match": {"tool_result": True}, "reply": {"text": "It is sunny."}},
    {"match": {"model": SHORT}, "faults": {"expire_after": 1.0}},
    # (Time for a turn before the goAway, even on a busy machine.)
    {"match": {"model": BRIEF}, "faults": {"expire_after": 3.0}},
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerThread]:
    tls = tmp_path_factory.mktemp("tls")
    with ServerThread(Emulator(parse_scenarios(SCENARIOS)), tls=tls) as running:
        yield running


@pytest.fixture
def trusted(server: ServerThread, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``SSL_CERT_FILE`` names the emulator's authority (google-genai reads it when its
    client is made)."""
    assert server.tls is not None
    monkeypatch.setenv("SSL_CERT_FILE", str(server.tls.ca_file))
    return Path(server.tls.ca_file)


def client(server: ServerThread, key: str = "k", **options: Any) -> genai.Client:
    return genai.Client(
        api_key=key, http_options=types.HttpOptions(base_url=server.base_url + "/gemini", **options)
    )


async def turn(session: Any) -> list[types.LiveServerMessage]:
    """The messages of one turn (the SDK's ``receive`` stops after ``turnComplete``)."""
    return [message async for message in session.receive()]


async def resume_and_say_hello(server: ServerThread, model: str, handle: str) -> str:
    """Open a new connection resuming ``handle``, say "Hello", and return the reply's text."""
    config = types.LiveConnectConfig(
        response_modalities=[types.Modality.TEXT],
        session_resumption=types.SessionResumptionConfig(handle=handle),
    )
    async with client(server).aio.live.connect(model=model, config=config) as session:
        await session.send_client_content(
            turns=types.Content(role="user", parts=[types.Part(text="Hello")])
        )
        return "".join(m.text for m in await turn(session) if m.text)


def history_of(emulator: Emulator, opening: str) -> list[dict[str, Any]]:
    """The emulator's conversation of the one session whose first turn says
    ``opening`` (the sessions of every test are kept; some have no turns)."""
    sessions = emulator.socket_state("gemini_live")["sessions"]
    (history,) = [
        v["history"]
        for v in sessions.values()
        if v["history"] and v["history"][0]["parts"][0].get("text") == opening
    ]
    return history


def test_a_text_turn(server: ServerThread, trusted: Path) -> None:
    async def main() -> list[types.LiveServerMessage]:
        config = types.LiveConnectConfig(response_modalities=[types.Modality.TEXT])
        async with client(server).aio.live.connect(model=MODEL, config=config) as session:
            await session.send_client_content(
                turns=types.Content(role="user", parts=[types.Part(text="Hello")])
            )
            return await turn(session)

    messages = asyncio.run(main())
    assert "".join(m.text for m in messages if m.text) == SAID
    last = messages[-1]
    assert last.server_content is not None and last.server_content.turn_complete is True
    assert last.usage_metadata is not None
    assert (last.usage_metadata.prompt_token_count, last.usage_metadata.response_token_count) == (
        10,
        19,
    )
    assert [m.server_content.generation_complete for m in messages[-2:-1]] == [True]  # type: ignore[union-attr]


def test_a_spoken_turn_from_audio_with_transcriptions(server: ServerThread, trusted: Path) -> None:
    async def main() -> list[types.LiveServerMessage]:
        config = types.LiveConnectConfig(
            response_modalities=[types.Modality.AUDIO],
            input_audio_transcription=types.AudioTranscriptionConfig(),
            output_audio_transcription=types.AudioTranscriptionConfig(),
        )
        async with client(server).aio.live.connect(model=MODEL, config=config) as session:
            audio = types.Blob(data=b"\x00\x00" * 8000, mime_type="audio/pcm;rate=16000")
            await session.send_realtime_input(audio=audio)
            await session.send_realtime_input(audio_stream_end=True)
            return await turn(session)

    messages = asyncio.run(main())
    contents = [m.server_content for m in messages if m.server_content is not None]
    heard = [c.input_transcription.text for c in contents if c.input_transcription]
    assert heard == ["Emulated transcript of 0.50 s of audio."]
    said = "".join(c.output_transcription.text or "" for c in contents if c.output_transcription)
    assert said == f"Emulated reply from {MODEL}."
    assert b"".join(m.data for m in messages if m.data) == tone(said, rate=24000)
    parts = [p for c in contents if c.model_turn for p in c.model_turn.parts or ()]
    assert {p.inline_data.mime_type for p in parts if p.inline_data} == {"audio/pcm;rate=24000"}


def test_a_tool_call_and_its_response(server: ServerThread, trusted: Path) -> None:
    async def main() -> tuple[types.LiveServerToolCall, list[types.LiveServerMessage]]:
        declaration = types.FunctionDeclaration(
            name="get_weather",
            parameters=types.Schema(
                type=types.Type.OBJECT, properties={"city": types.Schema(type=types.Type.STRING)}
            ),
        )
        config = types.LiveConnectConfig(
            response_modalities=[types.Modality.TEXT],
            tools=[types.Tool(function_declarations=[declaration])],
        )
        async with client(server).aio.live.connect(model=MODEL, config=config) as session:
            await session.send_client_content(
                turns=types.Content(role="user", parts=[types.Part(text="The weather?")])
            )
            async for message in session.receive():
                if message.tool_call is not None:
                    call = message.tool_call
                    break
            (function_call,) = call.function_calls or []
            await session.send_tool_response(
                function_responses=[
                    types.FunctionResponse(
                        id=function_call.id, name=function_call.name, response={"temp": 21}
                    )
                ]
            )
            return call, await turn(session)

    call, messages = asyncio.run(main())
    (function_call,) = call.function_calls or []
    assert (function_call.name, function_call.args) == ("get_weather", {"city": "Paris"})
    assert function_call.id
    assert "".join(m.text for m in messages if m.text) == "It is sunny."


def test_speaking_over_a_reply_interrupts_it(server: ServerThread, trusted: Path) -> None:
    emulator: Emulator = server.app.state.emulator

    async def main() -> tuple[list[types.LiveServerMessage], list[types.LiveServerMessage]]:
        config = types.LiveConnectConfig(
            response_modalities=[types.Modality.TEXT],
            realtime_input_config=types.RealtimeInputConfig(
                automatic_activity_detection=types.AutomaticActivityDetection(disabled=True)
            ),
        )
        async with client(server).aio.live.connect(model=MODEL, config=config) as session:
            await session.send_client_content(
                turns=types.Content(role="user", parts=[types.Part(text="Count slowly")])
            )
            cut: list[types.LiveServerMessage] = []
            async for message in session.receive():  # (until the turnComplete)
                cut.append(message)
                if len(cut) == 3:  # the user starts speaking over the reply
                    await session.send_realtime_input(activity_start=types.ActivityStart())
            audio = types.Blob(data=b"\x00\x00" * 8000, mime_type="audio/pcm;rate=16000")
            await session.send_realtime_input(audio=audio)
            await session.send_realtime_input(activity_end=types.ActivityEnd())
            return cut, await turn(session)

    cut, after = asyncio.run(main())
    # What was said before the user spoke, then the cut: no generationComplete.
    assert [m.model_dump(exclude_none=True) for m in cut] == [
        *({"server_content": {"model_turn": {"parts": [{"text": text}]}}} for text in COUNTING[:3]),
        {"server_content": {"interrupted": True}},
        {"server_content": {"turn_complete": True}},
    ]
    # The user's spoken turn is answered in full.
    assert "".join(m.text for m in after if m.text) == f"Emulated reply from {MODEL}."
    assert [m.server_content.generation_complete for m in after[-2:-1]] == [True]  # type: ignore[union-attr]
    assert after[-1].server_content is not None and after[-1].server_content.turn_complete
    # The conversation keeps what the model said before it was cut.
    history = history_of(emulator, "Count slowly")
    assert history == [
        {"role": "user", "parts": [{"text": "Count slowly"}]},
        {"role": "model", "parts": [{"text": "".join(COUNTING[:3])}]},
        {"role": "user", "parts": [{"text": ""}]},  # (the audio)
        {"role": "model", "parts": [{"text": f"Emulated reply from {MODEL}."}]},
    ]


def test_resumption_by_handle_goes_on_with_the_conversation(
    server: ServerThread, trusted: Path
) -> None:
    emulator: Emulator = server.app.state.emulator

    async def main() -> tuple[str, str]:
        config = types.LiveConnectConfig(
            response_modalities=[types.Modality.TEXT],
            session_resumption=types.SessionResumptionConfig(),
        )
        handle = ""
        async with client(server).aio.live.connect(model=MODEL, config=config) as session:
            await session.send_client_content(
                turns=types.Content(role="user", parts=[types.Part(text="Remember me")])
            )
            first = [
                m.session_resumption_update
                for m in await turn(session)
                if m.session_resumption_update
            ]
            assert len(first) == 1 and first[0].resumable  # the setup's
            async for message in session.receive():  # the update after the turn
                update = message.session_resumption_update
                if update is not None and update.resumable:
                    handle = update.new_handle or ""
                    break
        return handle, await resume_and_say_hello(server, MODEL, handle)

    handle, text = asyncio.run(main())
    assert handle.startswith("handle-") and text == SAID
    history = history_of(emulator, "Remember me")
    texts = [p["text"] for t in history for p in t["parts"] if "text" in p]
    assert texts == [
        "Remember me",
        f"Emulated reply from {MODEL}. You said: Remember me",
        "Hello",
        SAID,
    ]


def test_go_away_before_the_deadline(server: ServerThread, trusted: Path) -> None:
    async def main() -> tuple[str | None, genai_errors.APIError]:
        config = types.LiveConnectConfig(response_modalities=[types.Modality.TEXT])
        async with client(server).aio.live.connect(model=SHORT, config=config) as session:
            left = None
            with pytest.raises(genai_errors.APIError) as caught:
                while True:
                    async for message in session.receive():
                        if message.go_away is not None:
                            left = message.go_away.time_left
        return left, caught.value

    left, error = asyncio.run(main())
    assert left == "0.5s"
    # (The SDK raises the close as an APIError: the code, the reason in its text.)
    assert error.code == 1011 and str(error).endswith("Deadline expired")


def test_go_away_then_a_resumed_session_goes_on(server: ServerThread, trusted: Path) -> None:
    emulator: Emulator = server.app.state.emulator

    async def main() -> tuple[list[types.LiveServerMessage], str]:
        config = types.LiveConnectConfig(
            response_modalities=[types.Modality.TEXT],
            session_resumption=types.SessionResumptionConfig(),
        )
        seen: list[types.LiveServerMessage] = []
        async with client(server).aio.live.connect(model=BRIEF, config=config) as session:
            await session.send_client_content(
                turns=types.Content(role="user", parts=[types.Part(text="Before the goAway")])
            )
            while not seen or seen[-1].go_away is None:
                async for message in session.receive():
                    seen.append(message)
                    if message.go_away is not None:
                        break
        # (The old connection is closed: a session is open on one connection at a time.)
        updates = [m.session_resumption_update for m in seen if m.session_resumption_update]
        handle = [u.new_handle for u in updates if u.resumable][-1]
        return seen, await resume_and_say_hello(server, BRIEF, handle or "")

    seen, text = asyncio.run(main())

    def kind(message: types.LiveServerMessage) -> str:
        """The message's field (within ``server_content``, its first: not the usage)."""
        if message.text:
            return "text"
        field = next(iter(message.model_dump(exclude_none=True)))
        content = message.server_content
        return field if content is None else next(iter(content.model_dump(exclude_none=True)))

    said = f"Emulated reply from {BRIEF}. You said: Before the goAway"
    kinds = [kind(m) for m in seen]
    texts = kinds.count("text")
    assert kinds == [
        "session_resumption_update",  # the setup's
        *["text"] * texts,
        "generation_complete",
        "turn_complete",
        "session_resumption_update",  # the turn's: the handle to resume with
        "go_away",
    ]
    assert "".join(m.text for m in seen if m.text) == said
    assert seen[-1].go_away is not None and seen[-1].go_away.time_left == "1.5s"
    first, last = (m.session_resumption_update for m in seen if m.session_resumption_update)
    assert first is not None and last is not None and first.new_handle != last.new_handle
    assert text == f"Emulated reply from {BRIEF}. You said: Hello"
    history = history_of(emulator, "Before the goAway")
    assert history == [
        {"role": "user", "parts": [{"text": "Before the goAway"}]},
        {"role": "model", "parts": [{"text": said}]},
        {"role": "user", "parts": [{"text": "Hello"}]},
        {"role": "model", "parts": [{"text": text}]},
    ]


def test_ephemeral_tokens_open_the_constrained_endpoint(
    server: ServerThread, trusted: Path
) -> None:
    async def main() -> tuple[types.AuthToken, str]:
        minting = client(server, api_version="v1alpha")
        token = await minting.aio.auth_tokens.create(
            config=types.CreateAuthTokenConfig(
                uses=1,
                live_connect_constraints=types.LiveConnectConstraints(
                    model=MODEL,
                    config=types.LiveConnectConfig(response_modalities=[types.Modality.TEXT]),
                ),
            )
        )
        assert token.name is not None
        holder = client(server, key=token.name, api_version="v1alpha")
        async with holder.aio.live.connect(model=MODEL) as session:
            await session.send_client_content(
                turns=types.Content(role="user", parts=[types.Part(text="Hello")])
            )
            text = "".join(m.text for m in await turn(session) if m.text)
        with pytest.raises(genai_errors.APIError) as caught:  # its one use is spent
            async with holder.aio.live.connect(model=MODEL) as session:
                await turn(session)
        assert caught.value.code == 1008
        assert str(caught.value).endswith("The ephemeral token has no uses left.")
        return token, text

    with warnings.catch_warnings():
        # (The SDK says its ephemeral tokens are experimental.)
        warnings.filterwarnings("ignore", message="The SDK's .*token")
        token, text = asyncio.run(main())
    assert token.name is not None and token.name.startswith("auth_tokens/")
    assert token.uses == 1 and token.expire_time is not None
    assert text == SAID  # text replies: the token's setup, though the client asked none


def test_an_unknown_model_is_a_close_1008(server: ServerThread, trusted: Path) -> None:
    async def main() -> None:
        config = types.LiveConnectConfig(response_modalities=[types.Modality.TEXT])
        async with client(server).aio.live.connect(model="nope-1", config=config) as session:
            await session.send_client_content(
                turns=types.Content(role="user", parts=[types.Part(text="Hello")])
            )
            await turn(session)

    with pytest.raises(genai_errors.APIError) as caught:
        asyncio.run(main())
    assert caught.value.code == 1008 and "nope-1" in str(caught.value)
