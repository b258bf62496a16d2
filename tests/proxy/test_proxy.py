"""The gateway's sans-I/O decisions: routing, keys, scrubbing, journal cursors."""

from __future__ import annotations

import pytest

from polystream.gateway_core import (
    GatewayConfig,
    Route,
    SSECursorSplitter,
    Upstream,
    check_key,
    load_config,
    parse_upstream_spec,
    presented_key,
    scrub,
)
from polystream.wire.sse import SSEDecoder


def _config(**kw: object) -> GatewayConfig:
    ups = {
        "openai": Upstream(name="openai", dialect="openai_responses"),
        "anthropic": Upstream(name="anthropic", dialect="anthropic_messages"),
        "gemini": Upstream(name="gemini", dialect="gemini_generate"),
    }
    return GatewayConfig(upstreams=ups, **kw)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("model", "upstream"),
    [
        ("gpt-5.4-nano", "openai"),
        ("o4-mini", "openai"),
        ("claude-haiku-4-5", "anthropic"),
        ("gemini-3.8-flash", "gemini"),
    ],
)
def test_default_routes(model: str, upstream: str) -> None:
    routed = _config().route(model)
    assert routed is not None and routed[0].name == upstream and routed[1] == model


def test_no_route_and_configured_routes_first() -> None:
    assert _config().route("grok-4.3") is None  # no xai upstream configured
    config = _config(routes=[Route(model="fast", upstream="anthropic", rewrite="claude-x")])
    assert config.route("fast") == (config.upstreams["anthropic"], "claude-x")


def test_single_upstream_takes_everything() -> None:
    config = GatewayConfig(upstreams={"x": Upstream(name="x", dialect="openai_chat")})
    assert config.route("anything")[1] == "anything"  # type: ignore[index]


def test_upstream_spec() -> None:
    assert parse_upstream_spec("openai") == Upstream(name="openai", dialect="openai_responses")
    assert parse_upstream_spec("openai_chat=http://h/v1") == Upstream(
        name="openai", dialect="openai_chat", base_url="http://h/v1"
    )
    with pytest.raises(ValueError, match="unknown upstream"):
        parse_upstream_spec("nope")


def test_config_file() -> None:
    config = load_config(
        b'{"upstreams": {"c": {"dialect": "anthropic_messages", "api_key": "k"}},'
        b' "routes": [{"model": "*", "upstream": "c"}], "api_key": "gw"}'
    )
    assert config.upstreams["c"].name == "c" and config.api_key == "gw"
    assert config.secrets() == ["k", "gw"]
    with pytest.raises(Exception, match="unknown dialect"):
        load_config(b'{"upstreams": {"c": {"dialect": "nope"}}}')


def test_presented_keys() -> None:
    assert presented_key("openai_chat", {"Authorization": "Bearer abc"}, {}) == "abc"
    assert presented_key("anthropic_messages", {"x-api-key": "abc"}, {}) == "abc"
    assert presented_key("gemini_generate", {}, {"key": "abc"}) == "abc"
    assert presented_key("gemini_generate", {"x-goog-api-key": "abc"}, {}) == "abc"
    assert check_key(None, None) and check_key("a", "a") and not check_key("a", "b")
    assert not check_key("a", None)


def test_scrub_removes_whole_and_partial_echoes() -> None:
    secret = "sk-proj-abcdef0123456789xyz"
    text = f"bad key {secret}; provided: {secret[:8]}...{secret[-6:]}"
    # The head is 8 characters (a fragment that long goes); the 6 character tail stays.
    assert scrub(text, [secret]) == "bad key [redacted]; provided: [redacted]...789xyz"


def _frames(data: bytes) -> list[tuple[str | None, str, str | None]]:
    decoder = SSEDecoder()
    return [(f.event, f.data, f.id) for f in decoder.feed(data) if hasattr(f, "data")]


@pytest.mark.parametrize("newline", [b"\n", b"\r\n", b"\r"])
def test_counter_cursors_add_ids_whatever_the_line_ends(newline: bytes) -> None:
    nl = newline
    stream = b'data: {"a":1}' + nl + nl + b'data: {"b":2}' + nl + nl
    splitter = SSECursorSplitter("anthropic_messages", "s1")
    entries = splitter.split(stream[:7]) + splitter.split(stream[7:])
    assert [c for c, _ in entries] == ["s1.1", "s1.2"]
    out = b"".join(d for _, d in entries)
    assert _frames(out) == [(None, '{"a":1}', "s1.1"), (None, '{"b":2}', "s1.2")]


def test_sequence_number_cursors_and_response_id() -> None:
    stream = (
        b'event: response.created\ndata: {"type":"response.created","sequence_number":0,'
        b'"response":{"id":"resp_1"}}\n\n'
        b'event: response.completed\ndata: {"type":"response.completed",'
        b'"sequence_number":1,"response":{"id":"resp_1"}}\n\n'
    )
    splitter = SSECursorSplitter("openai_responses", "s")
    entries = splitter.split(stream)
    assert [c for c, _ in entries] == ["0", "1"]
    assert b"".join(d for _, d in entries) == stream
    assert splitter.native_id == "resp_1"


def test_interaction_event_id_cursors() -> None:
    stream = (
        b'event: interaction.created\ndata: {"interaction":{"id":"v1_x"},'
        b'"event_type":"interaction.created","event_id":"evt_1"}\n\n'
        b"event: done\ndata: [DONE]\n\n"
    )
    splitter = SSECursorSplitter("gemini_interactions", "s")
    assert [c for c, _ in splitter.split(stream)] == ["evt_1", "x2"]
    assert splitter.native_id == "v1_x"


def test_gemini_events_keep_their_bytes() -> None:
    stream = b'data: {"a":1}\r\n\r\n'
    splitter = SSECursorSplitter("gemini_generate", "s1")
    assert splitter.split(stream) == [("s1.1", stream)]
