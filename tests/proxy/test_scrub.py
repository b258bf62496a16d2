"""Scrubbing: configured secrets, their 8+ character fragments and URL credentials are
replaced by a marker in text, JSON-like values and the events a gateway sends."""

from __future__ import annotations

import time

import msgspec
import pytest

from polystream.events import (
    ErrorEvent,
    ErrorInfo,
    Finish,
    FinishReason,
    Raw,
    TextDelta,
    Unknown,
    Warning,
)
from polystream.gateway_core import scrub
from polystream.scrub import MARKER, Scrubber, url_credentials

KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123"


def _windows(secret: str) -> set[str]:
    return {secret[i : i + 8] for i in range(len(secret) - 7)}


def _leaks(text: str, secret: str) -> list[str]:
    return sorted(w for w in _windows(secret) if w in text)


def test_whole_key_fragment_and_elided_echo() -> None:
    s = Scrubber([KEY])
    assert s.text(f"Incorrect key: {KEY}.") == "Incorrect key: [redacted]."
    assert s.text(f"key ...{KEY[12:22]}... here") == "key ...[redacted]... here"
    # Providers elide the middle: the 8+ character head goes, the 4 character tail stays.
    assert s.text("provided: sk-proj-abc...0123") == "provided: [redacted]...0123"
    assert s.text(f"{KEY[:8]}|{KEY[-8:]}") == "[redacted]|[redacted]"


def test_every_fragment_of_eight_or_more_characters_is_removed() -> None:
    s = Scrubber([KEY])
    for length in range(8, len(KEY) + 1):
        for start in range(len(KEY) - length + 1):
            fragment = KEY[start : start + length]
            assert s.text(f"<{fragment}>") == "<[redacted]>", fragment


def test_a_fragment_of_seven_characters_stays() -> None:
    assert Scrubber([KEY]).text(f"<{KEY[5:12]}>") == f"<{KEY[5:12]}>"


def test_adjacent_and_overlapping_fragments_become_one_marker() -> None:
    other = "ghp_ZYXWVUTSRQPONMLK"
    s = Scrubber([KEY, other])
    assert s.text(f"a {KEY}{other} b") == "a [redacted] b"
    assert s.text(f"a {KEY} {other} b") == "a [redacted] [redacted] b"


def test_secrets_shorter_than_a_window_are_not_looked_for() -> None:
    # A placeholder key ("x", "none") cannot be told apart from ordinary words: looking
    # for it would garble every message that holds them.
    s = Scrubber(["x", "none", "pw1234", KEY])
    assert s.secrets == (KEY,)
    text = "exactly none of the 6 tools; pw1234 is no key"
    assert s.text(text) is text
    assert s.text(f"{text} {KEY}") == f"{text} [redacted]"


def test_url_userinfo_and_query_are_removed() -> None:
    s = Scrubber([])
    assert (
        s.text("cannot reach http://bob:hunter2@127.0.0.1:9/v1?token=abc&x=1: refused")
        == "cannot reach http://[redacted]@127.0.0.1:9/v1?[redacted]: refused"
    )
    assert s.text('see "https://h.example/p?key=zz".') == 'see "https://h.example/p?[redacted]".'
    assert s.text("https://host/path, fine") == "https://host/path, fine"


def test_text_without_a_secret_is_the_same_object() -> None:
    s = Scrubber([KEY, "short"])
    text = "It is sunny in Paris, with a light breeze from the west."
    assert s.text(text) is text
    assert s.text("") == ""


def test_scrub_takes_a_list_or_a_scrubber() -> None:
    assert scrub(f"bad key {KEY}", [KEY, ""]) == "bad key [redacted]"
    assert scrub(f"bad key {KEY}", Scrubber([KEY])) == "bad key [redacted]"
    assert scrub("nothing", []) == "nothing"


def test_values_are_walked_keys_bytes_and_raw_too() -> None:
    s = Scrubber([KEY])
    value = {
        "error": {"message": f"bad {KEY}", "n": 3, "ok": True, "none": None},
        KEY: [KEY[:9], (KEY[3:12], 1.5)],
        "bytes": f"b {KEY}".encode(),
        "raw": msgspec.Raw(f'"{KEY}"'.encode()),
    }
    out = s.value(value)
    assert out["error"] == {"message": "bad [redacted]", "n": 3, "ok": True, "none": None}
    assert out[MARKER] == [MARKER, (MARKER, 1.5)]
    assert out["bytes"] == b"b [redacted]"
    assert isinstance(out["raw"], msgspec.Raw) and bytes(out["raw"]) == b'"[redacted]"'


def test_error_events_are_scrubbed_everywhere_they_carry_text() -> None:
    s = Scrubber([KEY])
    info = ErrorInfo(
        kind="authentication",
        message=f"Incorrect API key provided: {KEY}",
        code=f"bad_{KEY}",
        raw={"error": {"message": f"Incorrect API key provided: {KEY}"}},
    )
    event = ErrorEvent(error=info, extra={"detail": KEY}, raw={"key": KEY})
    out = s.event(event)
    assert isinstance(out, ErrorEvent)
    assert out.error == ErrorInfo(
        kind="authentication",
        message="Incorrect API key provided: [redacted]",
        code="bad_[redacted]",
        raw={"error": {"message": "Incorrect API key provided: [redacted]"}},
    )
    assert out.extra == {"detail": MARKER} and out.raw == {"key": MARKER}
    finish = Finish(status="failed", reason=FinishReason(unified="error"), error=info)
    scrubbed = s.event(finish)
    assert isinstance(scrubbed, Finish) and scrubbed.error is not None
    assert scrubbed.error.message == "Incorrect API key provided: [redacted]"
    warning = s.event(Warning(code="retry", message=f"retrying after {KEY}"))
    assert isinstance(warning, Warning) and warning.message == "retrying after [redacted]"
    unknown = s.event(Unknown(data=f'{{"k": "{KEY}"}}', name="x"))
    assert isinstance(unknown, Unknown) and unknown.data == '{"k": "[redacted]"}'
    raw = s.event(Raw(dialect="openai_chat", data={"error": KEY}))
    assert isinstance(raw, Raw) and raw.data == {"error": MARKER}


def test_other_events_pass_as_they_are() -> None:
    s = Scrubber([KEY])
    delta = TextDelta(index=0, delta=f"the model said {KEY}")
    assert s.event(delta) is delta
    finish = Finish(status="completed", reason=FinishReason(unified="stop"))
    assert s.event(finish) is finish


def test_url_credentials() -> None:
    assert url_credentials("http://bob:hunter2@h:1/v1?token=abc") == [
        "bob:hunter2",
        "hunter2",
        "token=abc",
    ]
    assert url_credentials("https://api.openai.com/v1") == []
    assert url_credentials(None) == []


def test_time_is_linear_in_the_text() -> None:
    """100 secrets of 64 characters against 200,000 characters of text with a fragment
    every 1,000: each window is looked up once (a search per fragment of every secret
    would take minutes)."""
    secrets = [f"{n:04d}" + "k" * 20 + f"{n:040x}" for n in range(100)]
    chunk = "x" * 990 + secrets[7][10:20]
    text = chunk * 200
    s = Scrubber(secrets)
    began = time.perf_counter()
    out = s.text(text)
    assert time.perf_counter() - began < 5.0
    assert out == ("x" * 990 + MARKER) * 200
    assert not any(_leaks(out, secret) for secret in secrets[:10])


@pytest.mark.parametrize("secret", [KEY, "tok_0123456789", "abcdefgh"])
def test_no_window_survives_in_a_noisy_text(secret: str) -> None:
    text = f"a{secret}b {secret[1:-1]} c{secret[:-2]}{secret[2:]}d"
    assert _leaks(Scrubber([secret]).text(text), secret) == []
