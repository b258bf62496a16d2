"""The official google-genai SDK's Live client (``client.aio.live.connect``) against the
emulator over WSS (the SDK opens ``wss://`` whenever it has an API key: the emulator
serves TLS with a local authority, trusted through ``SSL_CERT_FILE``): text and spoken
turns, transcriptions, tool calls, resumption by handle, ``goAway``, ephemeral tokens
minted by ``client.aio.auth_tokens.create`` and the constrained endpoint, and a refusal
as a close code."""

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
SAID = f"Emulated reply from {MODEL}. You said: Hello"
SCENARIOS = [
    {
        "match": {"contains": "weather", "tool_result": False},
        "reply": {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}]},
    },
    {"match": {"tool_result": True}, "reply": {"text": "It is sunny."}},
    {"match": {"model": SHORT}, "faults": {"expire_after": 1.0}},
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
        again = types.LiveConnectConfig(
            response_modalities=[types.Modality.TEXT],
            session_resumption=types.SessionResumptionConfig(handle=handle),
        )
        async with client(server).aio.live.connect(model=MODEL, config=again) as session:
            await session.send_client_content(
                turns=types.Content(role="user", parts=[types.Part(text="Hello")])
            )
            text = "".join(m.text for m in await turn(session) if m.text)
        return handle, text

    handle, text = asyncio.run(main())
    assert handle.startswith("handle-") and text == SAID
    sessions = emulator.socket_state("gemini_live")["sessions"]
    (history,) = [
        v["history"]
        for v in sessions.values()
        if v["history"][0]["parts"][0].get("text") == "Remember me"
    ]
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
