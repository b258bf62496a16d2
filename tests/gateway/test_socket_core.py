"""The gateway's sans-I/O decisions for the WebSocket families (``polystream.gateway_core``):
paths, keys, models, upstream URLs, refusals, in-band errors, scrubbing, close codes,
and WebSocket families as upstreams in the configuration."""

from __future__ import annotations

import json

import msgspec
import pytest

from polystream.gateway_core import (
    SOCKET_PATHS,
    GatewayConfig,
    Route,
    Upstream,
    family_refusal,
    load_config,
    message_model,
    parse_upstream_spec,
    relayed_close_code,
    scrub_socket_message,
    socket_denial,
    socket_error,
    socket_key,
    socket_model,
    socket_refusal,
    upstream_socket_url,
    with_model,
)
from polystream.scrub import Scrubber

SECRET = "sk-secret-0123456789abcdef"


def test_every_family_at_the_path_its_sdk_derives() -> None:
    assert SOCKET_PATHS == {
        "/openai/v1/responses": "openai_responses_ws",
        "/openai/v1/realtime": "openai_realtime",
        "/xai/v1/responses": "xai_responses_ws",
        "/xai/v1/realtime": "xai_realtime",
        "/xai/v1/tts": "xai_tts",
        "/xai/v1/stt": "xai_stt",
        # (Gemini Live at each API version google-genai may use.)
        "/gemini/ws/google.ai.generativelanguage.v1beta.GenerativeService.BidiGenerateContent": (
            "gemini_live"
        ),
        "/gemini/ws/google.ai.generativelanguage.v1alpha.GenerativeService.BidiGenerateContent": (
            "gemini_live"
        ),
        "/gemini/ws/google.ai.generativelanguage.v1.GenerativeService.BidiGenerateContent": (
            "gemini_live"
        ),
    }


def test_where_a_client_presents_its_key() -> None:
    assert socket_key("openai_realtime", {"Authorization": "Bearer k1"}, {}) == ("k1", None)
    assert socket_key("openai_realtime", {"x-api-key": "k2"}, {}) == ("k2", None)
    # A browser's subprotocols: the plain one is accepted when offered, else the keyed one.
    offered = ["realtime", "openai-insecure-api-key.k3"]
    assert socket_key("openai_realtime", {}, {}, offered) == ("k3", "realtime")
    assert socket_key("openai_realtime", {}, {}, ["openai-insecure-api-key.k4"]) == (
        "k4",
        "openai-insecure-api-key.k4",
    )
    assert socket_key("xai_realtime", {}, {}, ["xai-client-secret.k5"]) == (
        "k5",
        "xai-client-secret.k5",
    )
    assert socket_key("openai_realtime", {}, {}, ["openai-insecure-api-key."]) == (None, None)
    assert socket_key("openai_realtime", {}, {"key": "k6"}) == (None, None)
    assert socket_key("xai_stt", {}, {}, ["xai-client-secret.k7"]) == (None, None)


def test_where_the_model_is() -> None:
    assert socket_model("openai_realtime", {"model": "gpt-realtime"}) == "gpt-realtime"
    assert socket_model("openai_realtime", {"call_id": "c"}) == ""
    assert socket_model("openai_responses_ws", {"model": "ignored"}) is None
    assert socket_model("xai_tts", {"voice": "eve"}) == ""
    text = '{"type":"response.create","model":"gpt-5.4","input":"Hi"}'
    assert message_model("openai_responses_ws", text) == (
        {"type": "response.create", "model": "gpt-5.4", "input": "Hi"},
        "gpt-5.4",
        "model",
    )
    assert message_model("openai_responses_ws", '{"type":"response.create","input":"x"}') is None
    named = message_model("openai_responses_ws", '{"type":"response.create","model":7}')
    assert named is not None and named[1] == ""
    assert message_model("openai_responses_ws", '{"type":"response.steer","model":"m"}') is None
    assert message_model("openai_responses_ws", '{"model": not json') is None
    assert message_model("openai_realtime", '{"type":"session.update","model":"m"}') is None


def test_a_model_rewritten_in_its_message() -> None:
    message = {"type": "response.create", "model": "fast", "input": "Hi"}
    assert with_model(message, "model", "gpt-5.4-mini") == (
        '{"type":"response.create","model":"gpt-5.4-mini","input":"Hi"}'
    )
    assert with_model({"type": "session.update"}, "session.model", "m") == (
        '{"type":"session.update","session":{"model":"m"}}'
    )


@pytest.mark.parametrize(
    ("family", "base_url", "query", "url"),
    [
        ("openai_realtime", None, {"model": "m"}, "wss://api.openai.com/v1/realtime?model=m"),
        ("openai_realtime", "http://h:9/v1", {}, "ws://h:9/v1/realtime"),
        ("openai_realtime", "https://h/openai/v1/", {}, "wss://h/openai/v1/realtime"),
        (
            "openai_responses_ws",
            "https://api.openai.com/v1",
            {},
            "wss://api.openai.com/v1/responses",
        ),
        (
            "xai_tts",
            "http://h/v1",
            {"voice": "eve", "a b": "c&d"},
            "ws://h/v1/tts?voice=eve&a+b=c%26d",
        ),
        (
            "xai_stt",
            "ws://h/v1?x=1",
            {"sample_rate": "16000"},
            "ws://h/v1/stt?x=1&sample_rate=16000",
        ),
    ],
)
def test_the_upstream_url(
    family: str, base_url: str | None, query: dict[str, str], url: str
) -> None:
    assert upstream_socket_url(family, base_url, query) == url


def test_another_family_is_translated_or_refused() -> None:
    assert socket_refusal("openai_realtime", "openai_realtime") is None
    # Two conversation families: translated.
    assert socket_refusal("openai_realtime", "xai_realtime", "grok") is None
    assert socket_refusal("xai_realtime", "openai_realtime") is None
    assert socket_refusal("openai_realtime", "openai_responses_ws", "resp") == (
        "the model is served by the resp upstream (openai_responses_ws, a WebSocket "
        "family), and a openai_realtime connection cannot be translated to it: "
        "openai_responses_ws conversations cannot be translated to or from another family"
    )
    assert socket_refusal("xai_tts", "openai_realtime") == (
        "the model is served by the openai_realtime upstream (openai_realtime, a WebSocket "
        "family), and a xai_tts connection cannot be translated to it: xai_tts "
        "conversations cannot be translated to or from another family"
    )
    assert socket_refusal("openai_responses_ws", "openai_responses") == (
        "the model is served by the openai_responses upstream (openai_responses, an HTTP "
        "dialect), and a openai_responses_ws connection is served only by a WebSocket "
        "upstream"
    )
    # An HTTP request routed to a WebSocket upstream.
    assert family_refusal("openai_responses", "openai_realtime") == (
        "the model is served by the openai_realtime upstream, a WebSocket family: an HTTP "
        "request of openai_responses is not relayed to it"
    )


def test_refusals_in_the_providers_shapes() -> None:
    assert json.loads(
        socket_denial("/openai/v1/realtime", 401, "bad key", kind="authentication")
    ) == {
        "error": {
            "message": "bad key",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }
    assert (
        json.loads(socket_denial("/elsewhere", 404, "no", kind="not_found"))["error"]["message"]
        == "no"
    )
    assert socket_error(
        "openai_responses_ws", 400, "nope", kind="invalid_request", param="model"
    ) == (
        '{"type":"error","status":400,"error":{"message":"nope","type":"invalid_request_error",'
        '"param":"model","code":null}}'
    )
    assert socket_error("openai_realtime", 503, "busy", kind="overloaded") == (
        '{"type":"error","error":{"type":"server_error","code":"service_unavailable",'
        '"message":"busy","param":null,"event_id":null}}'
    )
    assert socket_error("xai_tts", 400, "nope") == '{"type":"error","message":"nope"}'


def test_what_is_scrubbed_of_an_upstream_message() -> None:
    secrets = Scrubber([SECRET])
    delta = f'{{"type":"response.output_text.delta","delta":"{SECRET}"}}'
    assert scrub_socket_message(delta, secrets) is delta  # (the model's output: untouched)
    completed = '{"type":"response.completed","response":{"id":"r","error":null,"x":1}}'
    assert scrub_socket_message(completed, secrets) is completed
    spaced = '{"type": "response.completed", "response": {"error": null}}'
    assert scrub_socket_message(spaced, secrets) is spaced
    error = f'{{"type":"error","error":{{"message":"bad key {SECRET}","code":"k"}}}}'
    assert scrub_socket_message(error, secrets) == (
        '{"type":"error","error":{"message":"bad key [redacted]","code":"k"}}'
    )
    flat = f'{{"type":"error","message":"key {SECRET[:12]}..."}}'
    assert scrub_socket_message(flat, secrets) == '{"type":"error","message":"key [redacted]..."}'
    failed = (
        '{"type":"response.failed","response":{"id":"r","output":[{"text":"'
        f'{SECRET}"}}],"error":{{"message":"{SECRET}"}}}}}}'
    )
    assert json.loads(scrub_socket_message(failed, secrets)) == {
        "type": "response.failed",
        "response": {"id": "r", "output": [{"text": SECRET}], "error": {"message": "[redacted]"}},
    }
    clean = '{"type":"error","error":{"message":"nothing secret"}}'
    assert scrub_socket_message(clean, secrets) is clean
    assert scrub_socket_message(f'"error" {SECRET}', secrets) == '"error" [redacted]'


def test_close_codes_passed_on() -> None:
    assert relayed_close_code(4001, upstream=True) == 4001
    assert relayed_close_code(1008, upstream=False) == 1008
    assert relayed_close_code(1005, upstream=True) == 1000
    assert relayed_close_code(1006, upstream=True) == 1011
    assert relayed_close_code(1015, upstream=True) == 1011
    assert relayed_close_code(None, upstream=True) == 1011
    assert relayed_close_code(1005, upstream=False) == 1001
    assert relayed_close_code(1006, upstream=False) == 1001


def test_websocket_families_as_upstreams(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_upstream_spec("openai_realtime=http://h/v1") == Upstream(
        name="openai_realtime", dialect="openai_realtime", base_url="http://h/v1"
    )
    config = load_config(
        b'{"upstreams": {"voice": {"dialect": "xai_realtime"}}, "log_socket_usage": true}'
    )
    assert config.upstreams["voice"].dialect == "xai_realtime"
    assert config.log_socket_usage
    monkeypatch.setenv("XAI_API_KEY", "xai-key")
    assert config.upstreams["voice"].key() == "xai-key"
    with pytest.raises(msgspec.ValidationError, match="unknown dialect 'nope_ws'"):
        load_config(b'{"upstreams": {"x": {"dialect": "nope_ws"}}}')


def test_socket_routing() -> None:
    chat = Upstream(name="openai", dialect="openai_responses")
    voice = Upstream(name="voice", dialect="openai_realtime")
    other = Upstream(name="other", dialect="openai_realtime")
    plain = GatewayConfig(upstreams={"openai": chat, "voice": voice, "other": other})
    # No routes: the first upstream of the family, whatever the model.
    assert plain.route_socket("openai_realtime", "gpt-realtime") == (voice, "gpt-realtime")
    assert plain.route_socket("xai_stt", "") is None
    routed = GatewayConfig(
        upstreams={"openai": chat, "voice": voice, "other": other},
        routes=[Route(model="mini", upstream="other", rewrite="gpt-realtime-mini")],
    )
    assert routed.route_socket("openai_realtime", "mini") == (other, "gpt-realtime-mini")
    assert routed.route_socket("openai_realtime", "") == (voice, "")
    # Past the routes, the provider's default routes: an HTTP upstream, refused by family.
    assert routed.route_socket("openai_realtime", "gpt-realtime") == (chat, "gpt-realtime")


def test_the_command_line_warns_of_a_socket_upstream_without_a_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from polystream.cli._gateway import _missing_keys

    monkeypatch.delenv("XAI_API_KEY", raising=False)
    config = GatewayConfig(upstreams={"stt": Upstream(name="stt", dialect="xai_stt")})
    assert _missing_keys(config) == [
        "upstream stt (xai_stt) has no key: XAI_API_KEY is not set, so its requests are "
        "sent without one"
    ]
