"""`polystream call --realtime` through ``main(argv)``, against the scripted loopback
WebSocket server of the realtime client's tests: what is printed (stdout exactly, the
final line on stderr), what the server received, and the exit status of a turn that
completes, that the server refuses, and whose socket drops."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path
from typing import Any

import pytest

from polystream.cli import main
from polystream.cli._call_show import LOCAL_KEY
from polystream.dialects import PROVIDERS
from polystream.realtime import SOCKET_SPECS
from tests.helpers import FIXTURES
from tests.realtime_client.loopback import Loopback, Peer
from tests.realtime_client.scripts import (
    reply_end,
    reply_start,
    responses_error,
    responses_reply,
    text_delta,
    user_item,
)

KEY = "sk-test"
MODEL = "gpt-realtime"
TEXT_UPDATE = (
    '{"type":"session.update","session":{"type":"realtime",'
    '"output_modalities":["text"],"instructions":"Be brief."}}'
)
USER_HI = (
    '{"type":"conversation.item.create","item":{"type":"message","role":"user",'
    '"content":[{"type":"input_text","text":"Say hi"}]}}'
)
CREATE = '{"type":"response.create"}'
REALTIME_USAGE = {
    "total_tokens": 90,
    "input_tokens": 80,
    "output_tokens": 10,
    "input_token_details": {
        "text_tokens": 80,
        "audio_tokens": 0,
        "image_tokens": 0,
        "cached_tokens": 0,
    },
    "output_token_details": {"text_tokens": 10, "audio_tokens": 0},
}
REFUSAL = {
    "type": "error",
    "event_id": "event_1",
    "error": {
        "type": "invalid_request_error",
        "code": "model_not_found",
        "message": "The model gpt-nope does not exist.",
        "param": None,
        "event_id": None,
    },
}
LINE = r"first event \d+ ms, total \d+ ms\n"


def two_delta_reply() -> list[dict[str, Any]]:
    """A Realtime API text reply in two deltas, its ``response.done`` with usage."""
    end = reply_end("resp_1", "item_a1", "Hello there!", "item_u1")
    end[-1]["response"]["usage"] = REALTIME_USAGE
    return [
        *user_item("item_u1", "Say hi", None),
        *reply_start("resp_1", "item_a1", "item_u1"),
        text_delta("resp_1", "item_a1", "Hello"),
        text_delta("resp_1", "item_a1", " there!"),
        *end,
    ]


async def answers(peer: Peer) -> None:
    await peer.expect(3)
    await peer.send(*two_delta_reply())
    await peer.drain()


def call(*argv: str) -> int:
    return main(["call", *argv])


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for provider in PROVIDERS.values():
        monkeypatch.delenv(provider.env_key, raising=False)


@pytest.mark.parametrize(
    "target",
    [["openai", "--realtime"], ["openai_realtime"], ["openai", "--dialect", "openai_realtime"]],
)
def test_a_text_turn_is_printed_as_it_arrives(
    target: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with Loopback(answers) as server:
        status = call(
            *target,
            "--model",
            MODEL,
            "--base-url",
            server.base_url,
            "--api-key",
            KEY,
            "--instructions",
            "Be brief.",
            "Say hi",
        )
    out, err = capsys.readouterr()
    assert status == 0, err
    assert out == "Hello there!\n"
    assert re.fullmatch(r"-- completed \(completed\); tokens in 80 out 10; " + LINE, err)
    assert server.attempts == ["/v1/realtime?model=gpt-realtime"]
    peer = server.peers[0]
    assert peer.headers["authorization"] == f"Bearer {KEY}"
    assert peer.received == [TEXT_UPDATE, USER_HI, CREATE]
    assert peer.closed_by_client == 1000


def test_the_responses_socket_and_its_usage(capsys: pytest.CaptureFixture[str]) -> None:
    reply = responses_reply("resp_1", "Paris.")
    reply[-1]["response"]["usage"] = {
        "input_tokens": 12,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 3,
        "output_tokens_details": {"reasoning_tokens": 1},
        "total_tokens": 15,
    }

    async def only(peer: Peer) -> None:
        await peer.expect(1)
        await peer.send(*reply)
        await peer.drain()

    with Loopback(only) as server:
        status = call(
            "openai_responses_ws",
            "Capital of France?",
            "--model",
            "gpt-5.4-mini",
            "--system",
            "One word.",
            "--base-url",
            server.base_url,
            "--api-key",
            KEY,
        )
    out, err = capsys.readouterr()
    assert status == 0, err
    assert out == "Paris.\n"
    assert re.fullmatch(r"-- completed \(completed\); tokens in 12 out 3 reasoning 1; " + LINE, err)
    assert server.attempts == ["/v1/responses"]
    assert [json.loads(m) for m in server.peers[0].received] == [
        {
            "type": "response.create",
            "model": "gpt-5.4-mini",
            "instructions": "One word.",
            "input": "Capital of France?",
        }
    ]


def test_xai_maps_to_its_voice_agent_socket(capsys: pytest.CaptureFixture[str]) -> None:
    async def only(peer: Peer) -> None:
        await peer.expect(2)  # (no text-only setting: nothing to configure)
        await peer.send(*two_delta_reply())
        await peer.drain()

    with Loopback(only) as server:
        status = call(
            "xai", "--realtime", "Say hi", "--model", "grok-voice", "--base-url", server.base_url
        )
    out, err = capsys.readouterr()
    assert (status, out) == (0, "Hello there!\n"), err
    assert server.attempts == ["/v1/realtime?model=grok-voice"]
    assert server.peers[0].received == [USER_HI, CREATE]


def test_a_voice_reply_s_transcript_is_printed_and_its_audio_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = (FIXTURES / "openai_realtime" / "voice_turn.ws").read_text().splitlines()

    async def speaks(peer: Peer) -> None:
        await peer.expect(3)
        await peer.send(*lines)
        await peer.drain()

    out_file = tmp_path / "reply.pcm"
    with Loopback(speaks) as server:
        status = call(
            "openai_realtime",
            "Say hi",
            "--model",
            MODEL,
            "--base-url",
            server.base_url,
            "--out",
            str(out_file),
        )
    out, err = capsys.readouterr()
    assert (status, out) == (0, "Hello there!\n"), err  # (the reply's transcript)
    messages = [json.loads(line) for line in lines]
    audio = b"".join(
        base64.b64decode(m["delta"]) for m in messages if m["type"] == "response.output_audio.delta"
    )
    assert len(audio) == 7200
    assert out_file.read_bytes() == audio
    assert re.fullmatch(
        f"wrote 7200 bytes of audio to {re.escape(str(out_file))}\n"
        r"-- completed \(completed\); tokens in 173 out 80; " + LINE,
        err,
    )


def test_json_lines_are_the_routed_events(capsys: pytest.CaptureFixture[str]) -> None:
    with Loopback(answers) as server:
        status = call(
            "openai_realtime", "Say hi", "--model", MODEL, "--base-url", server.base_url, "--json"
        )
    out, err = capsys.readouterr()
    assert status == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    assert [(line["stream"], line["event"]["type"]) for line in lines] == [
        (0, "status"),  # the user item added
        (0, "status"),  # and done
        (1, "stream-start"),
        (1, "status"),  # the reply's item added
        (0, "status"),  # (in the conversation)
        (1, "block-start"),
        (1, "text-delta"),
        (1, "text-delta"),
        (1, "status"),  # the text done
        (1, "block-end"),
        (1, "status"),  # the reply's item done
        (0, "status"),  # (in the conversation)
        (1, "finish"),  # (with the usage)
    ]
    assert lines[-1]["event"]["usage"]["output_tokens"] == 10
    assert [line["event"]["delta"] for line in lines if line["event"]["type"] == "text-delta"] == [
        "Hello",
        " there!",
    ]
    assert lines[2]["response_id"] == "resp_1"


def test_a_refused_request_fails_the_turn_at_once(capsys: pytest.CaptureFixture[str]) -> None:
    async def refuses(peer: Peer) -> None:
        await peer.expect(3)
        await peer.send(REFUSAL)
        await peer.drain()

    with Loopback(refuses) as server:
        status = call(
            "openai", "--realtime", "Say hi", "--model", "gpt-nope", "--base-url", server.base_url
        )
    out, err = capsys.readouterr()
    assert (status, out) == (1, "")
    assert re.fullmatch(
        r"\n\[error invalid_request\] The model gpt-nope does not exist\.\n"
        # (no event of the reply came: no time to the first one)
        r"-- failed \(The model gpt-nope does not exist\.\); total \d+ ms\n",
        err,
    )
    assert server.peers[0].closed_by_client == 1000


def test_a_failed_reply_on_the_responses_socket(capsys: pytest.CaptureFixture[str]) -> None:
    async def fails(peer: Peer) -> None:
        await peer.expect(1)
        await peer.send(responses_error("model_not_found", "No such model.", status=404))
        await peer.drain()

    with Loopback(fails) as server:
        status = call(
            "openai_responses_ws", "Hi", "--model", "gpt-nope", "--base-url", server.base_url
        )
    out, err = capsys.readouterr()
    assert (status, out) == (1, "\n")
    assert re.fullmatch(
        r"\n\[error invalid_request\] No such model\.\n"
        r"-- failed \(No such model\.\); " + LINE,
        err,
    )


def test_a_socket_dropped_mid_reply_ends_it_truncated(capsys: pytest.CaptureFixture[str]) -> None:
    async def drops(peer: Peer) -> None:
        await peer.expect(3)
        await peer.send(
            *reply_start("resp_1", "item_a1", None), text_delta("resp_1", "item_a1", "Hel")
        )
        peer.ws.transport.abort()  # (no close frame: 1006)

    with Loopback(drops) as server:
        status = call("openai_realtime", "Say hi", "--model", MODEL, "--base-url", server.base_url)
    out, err = capsys.readouterr()
    assert (status, out) == (1, "Hel\n")
    assert re.fullmatch(
        r"\n\[error truncated\] the connection closed before response resp_1 was done\n"
        r"-- truncated \(the connection closed before response resp_1 was done\); " + LINE,
        err,
    )
    assert len(server.attempts) == 1  # (a turn is one connection: not reconnected)


def test_a_socket_dropped_before_the_reply(capsys: pytest.CaptureFixture[str]) -> None:
    async def drops(peer: Peer) -> None:
        await peer.expect(3)
        peer.ws.transport.abort()

    with Loopback(drops) as server:
        status = call("openai_realtime", "Say hi", "--model", MODEL, "--base-url", server.base_url)
    out, err = capsys.readouterr()
    assert (status, out, err) == (
        1,
        "",
        "polystream: error: the connection closed (close 1006)\n",
    )
    assert len(server.attempts) == 1


def test_keys(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # A base URL on this machine needs no key; the variable is used when set.
    with Loopback(answers, answers) as server:
        assert (
            call("openai_realtime", "Say hi", "--model", MODEL, "--base-url", server.base_url) == 0
        )
        monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
        assert (
            call("openai_realtime", "Say hi", "--model", MODEL, "--base-url", server.base_url) == 0
        )
    assert [peer.headers["authorization"] for peer in server.peers] == [
        f"Bearer {LOCAL_KEY}",
        "Bearer sk-env",
    ]
    capsys.readouterr()
    monkeypatch.delenv("OPENAI_API_KEY")
    missing = "polystream: error: no API key for openai: pass --api-key or set OPENAI_API_KEY\n"
    for argv in (
        ["openai", "--realtime", "Hi", "--model", MODEL],
        ["openai_realtime", "Hi", "--model", MODEL, "--base-url", "http://example.com/v1"],
        ["openai", "Hi", "--model", "gpt-5.4-nano"],  # (an HTTP call: the same)
    ):
        assert call(*argv) == 2
        assert capsys.readouterr() == ("", missing)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["anthropic", "--realtime"], "anthropic has no realtime API (WebSocket families: "),
        (["openai_chat", "--realtime"], "openai_chat is an HTTP dialect: with --realtime, "),
        (["openai", "--realtime", "--dialect", "openai_chat"], "with --realtime, --dialect "),
        (["openai_realtime", "--dialect", "openai_chat"], "openai_realtime is a WebSocket "),
        (["openai_realtime", "--max-tokens", "5"], "a realtime turn does not take --max-tokens\n"),
        (
            ["openai_realtime", "--field", "a=1", "--raw"],
            "a realtime turn does not take --raw, --field\n",
        ),
    ],
)
def test_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert call(*argv, "Hi", "--model", "m", "--api-key", KEY) == 2
    assert capsys.readouterr().err.startswith(f"polystream: error: {message}")


def test_a_prompt_is_needed(capsys: pytest.CaptureFixture[str]) -> None:
    assert call("openai_realtime", "--model", "m", "--api-key", KEY) == 2
    assert capsys.readouterr().err == "polystream: error: a realtime turn needs a PROMPT\n"


def test_each_default_socket_is_a_family_of_its_provider() -> None:
    defaults = {p.name: p.default_socket for p in PROVIDERS.values() if p.default_socket}
    assert defaults == {
        "openai": "openai_realtime",
        "xai": "xai_realtime",
        "gemini": "gemini_live",
    }
    for provider, family in defaults.items():
        assert SOCKET_SPECS[family].provider == provider


def test_gemini_maps_to_the_live_api(capsys: pytest.CaptureFixture[str]) -> None:
    lines = (FIXTURES / "gemini_live" / "text_turn.ws").read_text().splitlines()

    async def only(peer: Peer) -> None:
        await peer.expect(2)  # the setup (text replies), then the user's turn
        await peer.send(*lines)
        await peer.drain()

    with Loopback(only) as server:
        status = call(
            "gemini",
            "--realtime",
            "Say hi",
            "--model",
            "gemini-live-2.5-flash-preview",
            "--base-url",
            server.base_url,
        )
    out, err = capsys.readouterr()
    assert (status, out) == (0, "Hello there.\n"), err
    assert server.attempts == [
        "/v1/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent"
    ]
    assert [json.loads(m) for m in server.peers[0].received] == [
        {
            "setup": {
                "generationConfig": {"responseModalities": ["TEXT"]},
                "model": "models/gemini-live-2.5-flash-preview",
            }
        },
        {
            "clientContent": {
                "turns": [{"role": "user", "parts": [{"text": "Say hi"}]}],
                "turnComplete": True,
            }
        },
    ]
    assert "tokens in 9 out 3" in err
