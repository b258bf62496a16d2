"""The emulator's Gemini Live endpoint (``/gemini/ws/...BidiGenerateContent``): the
exact messages of a connection without a socket (the setup, a text turn, the lifetime's
``goAway`` and close), then polystream's own client over loopback: text and spoken
turns, transcriptions, tool calls, interruption, resumption by handle (the client
resumes on ``goAway``, only once the old socket is closed), ephemeral tokens and the
errors reported as close codes."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from polystream.errors import SocketClosed
from polystream.events import (
    BlockStart,
    DataDelta,
    ErrorEvent,
    Finish,
    FinishReason,
    Lifetime,
    Resumption,
    SessionUpdate,
    StreamWarning,
    TextDelta,
)
from polystream.realtime import AsyncConnection, Endpoint, Routed, connect, endpoint, text_turn
from polystream.scenario import Emulator, parse_scenarios
from polystream.scenario._media import tone
from polystream.scenario._sockets import Send, SocketEmulation
from polystream.server import ServerThread

MODEL = "gemini-live-2.5-flash-preview"
SAID = f"Emulated reply from {MODEL}. You said: Hello"
SHORT = "gemini-live-short"
PATH = "/gemini/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
SETUP = {
    "setup": {"model": f"models/{MODEL}", "generationConfig": {"responseModalities": ["TEXT"]}}
}


def emulation(scenarios: list[dict[str, Any]] | None = None) -> SocketEmulation:
    live = SocketEmulation(Emulator(parse_scenarios(scenarios or [])), "gemini_live", created=1_000)
    live.start(0.0)
    return live


def texts(sends: list[Send]) -> list[Any]:
    return [
        json.loads(s.text) if s.text is not None else ("close", s.close, s.reason) for s in sends
    ]


def test_a_text_turn_message_by_message() -> None:
    live = emulation([{"reply": {"text": ["Hi", " there."]}}])
    live.receive(json.dumps(SETUP), 0.0)
    (setup_complete,) = texts(live.due(0.0))
    assert list(setup_complete) == ["setupComplete"]
    session_id = setup_complete["setupComplete"]["sessionId"]
    assert session_id.startswith("session-")
    turn = {
        "clientContent": {
            "turns": [{"role": "user", "parts": [{"text": "Hello"}]}],
            "turnComplete": True,
        }
    }
    live.receive(json.dumps(turn), 0.0)
    sent = texts(live.due(0.0))
    assert sent[:-1] == [
        {"serverContent": {"modelTurn": {"parts": [{"text": "Hi"}]}}},
        {"serverContent": {"modelTurn": {"parts": [{"text": " there."}]}}},
        {"serverContent": {"generationComplete": True}},
    ]
    assert sent[-1]["serverContent"] == {"turnComplete": True}
    assert set(sent[-1]["usageMetadata"]) == {
        "promptTokenCount",
        "responseTokenCount",
        "totalTokenCount",
    }


def test_the_lifetime_goaway_then_deadline_expired() -> None:
    live = emulation([{"faults": {"expire_after": 10}}])
    live.receive(json.dumps(SETUP), 0.0)
    live.due(0.0)
    assert live.wake == 5.0  # half the lifetime: less than the service's 60 s
    assert texts(live.due(5.0)) == [{"goAway": {"timeLeft": "5s"}}]
    assert live.wake == 10.0
    assert texts(live.due(10.0)) == [("close", 1011, "Deadline expired")]


@pytest.mark.parametrize(
    ("first", "close"),
    [
        ({"clientContent": {"turnComplete": True}}, (1007, "The first message must be the setup.")),
        ({"setup": {}}, (1007, "Missing required field: setup.model")),
        ({"setup": {"model": "models/x"}, "clientContent": {}}, None),
        (
            {"setup": {"sessionResumption": {"handle": "nope"}, "model": MODEL}},
            (1007, "Invalid session resumption handle."),
        ),
    ],
)
def test_bad_openings_close_1007(first: dict[str, Any], close: tuple[int, str] | None) -> None:
    live = emulation()
    live.receive(json.dumps(first), 0.0)
    (sent,) = live.due(0.0)
    assert sent.close == 1007
    if close is not None:
        assert (sent.close, sent.reason) == close


# -- over loopback, polystream's client ------------------------------------------------


@pytest.fixture(scope="module")
def server() -> Iterator[ServerThread]:
    scenarios = [
        {
            "match": {"contains": "weather", "tool_result": False},
            "reply": {
                "tool_calls": [
                    {"name": "get_weather", "arguments": {"city": "Paris"}, "id": "fc-1"}
                ]
            },
        },
        {"match": {"tool_result": True}, "reply": {"text": "It is sunny."}},
        {
            "match": {"contains": "story"},
            "reply": {"text": ["Once", " upon", " a", " time"]},
            "timing": {"delay": 0.2},
        },
        {"match": {"model": SHORT}, "faults": {"expire_after": 1.0}},
    ]
    with ServerThread(Emulator(parse_scenarios(scenarios))) as running:
        yield running


def opened(server: ServerThread, **options: Any) -> AsyncConnection:
    options.setdefault("model", MODEL)
    return connect(
        "gemini_live", api_key="k", base_url=server.base_url + "/gemini", idle_timeout=10, **options
    )


async def until_finish(conn: AsyncConnection, seen: list[Routed]) -> Finish:
    async for routed in conn:
        seen.append(routed)
        if type(routed.event) is Finish:
            return routed.event
    raise AssertionError("no finish")


def test_text_turn(server: ServerThread) -> None:
    result = asyncio.run(
        text_turn(
            "gemini_live", "Hello", model=MODEL, api_key="k", base_url=server.base_url + "/gemini"
        )
    )
    assert (result.status, result.text) == ("completed", SAID)
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens) == (10, 19)
    assert result.usage.raw == {
        "promptTokenCount": 10,
        "responseTokenCount": 19,
        "totalTokenCount": 29,
    }


def test_a_spoken_turn_from_audio_with_transcriptions(server: ServerThread) -> None:
    async def main() -> list[Routed]:
        seen: list[Routed] = []
        async with opened(server) as conn:
            await conn.configure(inputAudioTranscription={}, outputAudioTranscription={})
            await conn.send_audio(b"\x00\x00" * 16000)  # 1 s at 16 kHz
            await conn.command("audio_stream_end")
            await until_finish(conn, seen)
        return seen

    seen = asyncio.run(main())
    heard = "Emulated transcript of 1.00 s of audio."
    assert [r.event for r in seen if r.stream == 0 and type(r.event) is TextDelta] == [
        TextDelta(index=0, delta=heard)
    ]
    said = f"Emulated reply from {MODEL}."  # (the spoken turn has no text)
    reply = [r.event for r in seen if r.stream == 1]
    starts = [e for e in reply if type(e) is BlockStart]
    assert [(b.kind, b.media.sample_rate if b.media else None) for b in starts] == [
        ("transcript", None),
        ("audio", 24000),
    ]
    transcript = "".join(e.delta for e in reply if type(e) is TextDelta)
    audio = b"".join(base64.b64decode(e.delta) for e in reply if type(e) is DataDelta)
    assert transcript == said
    assert audio == tone(said, rate=24000)
    assert reply[-1] == Finish(
        status="completed",
        reason=FinishReason(unified="stop"),
        usage=reply[-1].usage,  # type: ignore[union-attr]
    )


def test_a_tool_call_then_the_answer_in_the_same_turn(server: ServerThread) -> None:
    async def main() -> list[Routed]:
        seen: list[Routed] = []
        async with opened(server) as conn:
            tools = [
                {
                    "functionDeclarations": [
                        {"name": "get_weather", "parameters": {"type": "OBJECT"}}
                    ]
                }
            ]
            await conn.configure(generationConfig={"responseModalities": ["TEXT"]}, tools=tools)
            await conn.send_text("What is the weather?")
            async for routed in conn:
                seen.append(routed)
                if type(routed.event) is BlockStart and routed.event.kind == "tool_call":
                    break
            sent = await conn.tool_result("fc-1", {"temp": 21})
            assert (
                json.loads(sent[0])["toolResponse"]["functionResponses"][0]["name"] == "get_weather"
            )
            await until_finish(conn, seen)
        return seen

    seen = asyncio.run(main())
    assert {r.stream for r in seen if r.stream} == {1}
    kinds = [r.event.kind for r in seen if type(r.event) is BlockStart]
    assert kinds == ["tool_call", "text"]
    assert "".join(r.event.delta for r in seen if type(r.event) is TextDelta) == "It is sunny."


def test_new_input_interrupts_the_reply(server: ServerThread) -> None:
    async def main() -> list[Routed]:
        seen: list[Routed] = []
        async with opened(server) as conn:
            await conn.configure(generationConfig={"responseModalities": ["TEXT"]})
            await conn.send_text("Tell me a story")
            async for routed in conn:
                seen.append(routed)
                if type(routed.event) is TextDelta:
                    break
            await conn.command("activity_start")
            await until_finish(conn, seen)
        return seen

    seen = asyncio.run(main())
    assert seen[-1].event == Finish(
        status="incomplete", reason=FinishReason(unified="cancelled", raw="interrupted")
    )
    assert [r.event.delta for r in seen if type(r.event) is TextDelta] == ["Once"]


def test_goaway_resumes_on_a_new_socket_once_the_old_one_closed(server: ServerThread) -> None:
    emulator: Emulator = server.app.state.emulator

    async def main() -> tuple[list[Routed], AsyncConnection]:
        seen: list[Routed] = []
        conn = opened(server, model=SHORT)
        async with conn:
            await conn.configure(
                generationConfig={"responseModalities": ["TEXT"]}, resumption=True, transparent=True
            )
            await conn.send_text("Please stay")
            await until_finish(conn, seen)
            async for routed in conn:  # the goAway, then the new socket
                seen.append(routed)
                if type(routed.event) is StreamWarning:
                    break
            await conn.send_text("Hello")
            await until_finish(conn, seen)
        return seen, conn

    seen, conn = asyncio.run(main())
    assert conn.link.connections == 2
    going = [r.event for r in seen if type(r.event) is Lifetime]
    assert going == [
        Lifetime(
            state="going_away",
            reason="goAway",
            max_duration=600.0,
            time_left=0.5,
            extra={"timeLeft": "0.5s"},
        )
    ]
    warning = next(r.event for r in seen if type(r.event) is StreamWarning)
    assert warning.code == "reconnect" and "going away" in warning.message
    handles = [r.event.handle for r in seen if type(r.event) is Resumption]
    assert len(handles) >= 3 and all(handles)
    creations = [r.event for r in seen if type(r.event) is SessionUpdate]
    assert len(creations) == 2 and creations[0].id == creations[1].id  # the same session
    finishes = [r.event for r in seen if type(r.event) is Finish]
    assert [f.status for f in finishes] == ["completed", "completed"]
    # The session's conversation went on: both turns and both replies.
    sessions = emulator.socket_state("gemini_live")["sessions"]
    history = sessions[creations[0].id]["history"]
    assert [turn["role"] for turn in history] == ["user", "model", "user", "model"]
    assert history[2]["parts"] == [{"text": "Hello"}]


def test_resuming_a_session_still_open_is_refused(server: ServerThread) -> None:
    async def main() -> None:
        first = opened(server, reconnect=None)
        async with first:
            await first.configure(resumption=True)
            async for routed in first:
                if type(routed.event) is Resumption:
                    handle = routed.event.handle
                    break
            second = opened(server, reconnect=None)
            async with second:
                await second.configure(sessionResumption={"handle": handle})
                with pytest.raises(SocketClosed) as caught:
                    async for _routed in second:
                        pass
                assert caught.value.code == 1011

    asyncio.run(main())


def test_an_unknown_model_closes_1008(server: ServerThread) -> None:
    async def main() -> list[Routed]:
        seen: list[Routed] = []
        async with connect(
            "gemini_live",
            model="nope-1",
            api_key="k",
            base_url=server.base_url + "/gemini",
            reconnect=None,
        ) as conn:
            await conn.send_text("Hello")
            with pytest.raises(SocketClosed) as caught:
                async for routed in conn:
                    seen.append(routed)
            assert caught.value.code == 1008
        return seen

    seen = asyncio.run(main())
    errors = [r.event for r in seen if type(r.event) is ErrorEvent]
    assert (
        len(errors) == 1
        and errors[0].error.kind == "permission"
        and "nope-1" in errors[0].error.message
    )


def test_ephemeral_tokens(server: ServerThread) -> None:
    mint = server.base_url + "/gemini/v1alpha/auth_tokens"
    assert httpx.post(mint, json={}).status_code == 401
    answer = httpx.post(
        mint,
        json={
            "uses": 1,
            "bidiGenerateContentSetup": {"generationConfig": {"responseModalities": ["TEXT"]}},
        },
        headers={"x-goog-api-key": "k"},
    )
    assert answer.status_code == 200
    token = answer.json()
    assert token["name"].startswith("auth_tokens/") and token["uses"] == 1
    assert set(token) == {"name", "expireTime", "newSessionExpireTime", "uses"}
    constrained = (
        server.base_url.replace("http", "ws")
        + "/gemini/ws/google.ai.generativelanguage.v1alpha.GenerativeService."
        + "BidiGenerateContentConstrained"
    )

    async def turn(**where: Any) -> Any:
        return await text_turn(
            "gemini_live",
            "Hello",
            model=MODEL,
            api_key="unused",
            url=constrained,
            reconnect=None,
            **where,
        )

    # The token locks the setup: text replies though the client asks for nothing.
    result = asyncio.run(turn(headers={"Authorization": f"Token {token['name']}"}))
    assert (result.status, result.text) == ("completed", SAID)
    # A token given as the key goes to the constrained endpoint by itself.
    again = httpx.post(mint, json={"uses": 0}, headers={"x-goog-api-key": "k"}).json()["name"]
    assert endpoint("gemini_live", api_key=again, base_url="http://h/gemini") == Endpoint(
        url="ws://h/gemini/ws/google.ai.generativelanguage.v1alpha.GenerativeService."
        "BidiGenerateContentConstrained",
        headers={"authorization": f"Token {again}"},
        request_id_header="x-request-id",
    )
    for _ in range(2):  # (uses 0: unlimited)
        result = asyncio.run(
            text_turn(
                "gemini_live",
                "Hello",
                model=MODEL,
                api_key=again,
                base_url=server.base_url + "/gemini",
            )
        )
        assert (result.status, result.text) == ("completed", SAID)
    # One use only; then the close 1008 answers the turn (a refusal, before any reply).
    for name, message in [
        (token["name"], "The ephemeral token has no uses left."),
        ("auth_tokens/forged", "The ephemeral token is not valid."),
    ]:
        refused = asyncio.run(turn(query={"access_token": name}))
        assert (refused.status, refused.finish_reason.raw) == ("failed", "1008")
        assert [(e.kind, e.message) for e in refused.errors] == [("permission", message)]


def test_snake_case_fields_are_read_as_the_service_reads_them() -> None:
    # google-genai writes the top-level keys in snake case ({"client_content": ...}).
    live = emulation([{"reply": {"text": ["Hi"]}}])
    live.receive(
        json.dumps(
            {
                "setup": {
                    "model": f"models/{MODEL}",
                    "generation_config": {"response_modalities": ["TEXT"]},
                }
            }
        ),
        0.0,
    )
    live.due(0.0)
    turn = {
        "client_content": {
            "turns": [{"role": "user", "parts": [{"text": "Hello"}]}],
            "turn_complete": True,
        }
    }
    live.receive(json.dumps(turn), 0.0)
    assert texts(live.due(0.0))[0] == {"serverContent": {"modelTurn": {"parts": [{"text": "Hi"}]}}}


def test_every_api_version_is_served() -> None:
    from polystream.server._ws_emulator import SOCKET_ENDPOINTS, TOKEN_ENDPOINTS

    base = "/gemini/ws/google.ai.generativelanguage."
    served = sorted(path for path, family in SOCKET_ENDPOINTS.items() if family == "gemini_live")
    assert served == [
        base + "v1.GenerativeService.BidiGenerateContent",
        base + "v1alpha.GenerativeService.BidiGenerateContent",
        base + "v1alpha.GenerativeService.BidiGenerateContentConstrained",
        base + "v1beta.GenerativeService.BidiGenerateContent",
    ]
    assert {base + "v1alpha.GenerativeService.BidiGenerateContentConstrained"} == TOKEN_ENDPOINTS


def test_a_setup_naming_an_unknown_model_is_refused_at_once() -> None:
    live = emulation()
    live.receive(json.dumps({"setup": {"model": "models/nope-1"}}), 0.0)
    assert texts(live.due(0.0)) == [
        (
            "close",
            1008,
            "models/nope-1 is not found for API version v1beta, or is not supported for this "
            "method.",
        )
    ]


def test_the_sync_client(server: ServerThread) -> None:
    from polystream.realtime import text_turn_sync

    result = text_turn_sync(
        "gemini_live",
        "Hello",
        model=MODEL,
        api_key="k",
        base_url=server.base_url + "/gemini",
        instructions="Be brief.",
    )
    assert (result.status, result.text) == ("completed", SAID)


def test_an_interrupted_reply_ends_before_the_next_begins() -> None:
    live = emulation([{"reply": {"text": ["a", "b", "c"]}, "timing": {"delay": 1.0}}])
    live.receive(json.dumps(SETUP), 0.0)
    live.due(0.0)
    turn = {
        "clientContent": {
            "turns": [{"role": "user", "parts": [{"text": "Hi"}]}],
            "turnComplete": True,
        }
    }
    live.receive(json.dumps(turn), 0.0)
    assert texts(live.due(0.0)) == [{"serverContent": {"modelTurn": {"parts": [{"text": "a"}]}}}]
    live.receive(json.dumps(turn), 0.5)  # new input while the reply runs
    sent = texts(live.due(0.5))
    assert sent[:3] == [
        {"serverContent": {"interrupted": True}},
        {"serverContent": {"turnComplete": True}},
        {"serverContent": {"modelTurn": {"parts": [{"text": "a"}]}}},
    ]


ASK = {
    "clientContent": {"turns": [{"role": "user", "parts": [{"text": "Hi"}]}], "turnComplete": True}
}


@pytest.mark.parametrize(
    ("kind", "code"),
    [("overloaded", 1013), ("server", 1011), ("quota", 1008), ("invalid_request", 1007)],
)
def test_a_failing_reply_closes_the_socket(kind: str, code: int) -> None:
    live = emulation(
        [
            {
                "reply": {"text": ["a", "b"]},
                "faults": {"error": {"after": 1, "kind": kind, "message": "Nope."}},
            }
        ]
    )
    live.receive(json.dumps(SETUP), 0.0)
    live.due(0.0)
    live.receive(json.dumps(ASK), 0.0)
    assert texts(live.due(0.0)) == [
        {"serverContent": {"modelTurn": {"parts": [{"text": "a"}]}}},
        ("close", code, "Nope."),
    ]


def test_the_interrupt_fault() -> None:
    live = emulation([{"reply": {"text": ["a", "b"]}, "faults": {"interrupt": {"after": 1}}}])
    live.receive(json.dumps(SETUP), 0.0)
    live.due(0.0)
    live.receive(json.dumps(ASK), 0.0)
    assert texts(live.due(0.0)) == [
        {"serverContent": {"modelTurn": {"parts": [{"text": "a"}]}}},
        {"serverContent": {"interrupted": True}},
        {"serverContent": {"turnComplete": True}},
    ]
