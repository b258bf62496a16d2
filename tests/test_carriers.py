"""Opaque reasoning state across hops: A -> B -> A through polystream restores every
signature (Anthropic ``signature``, Gemini ``thoughtSignature``, OpenAI/xAI
``encrypted_content``, Interactions ``thought_signature``) wherever B has a documented
carrier, and B's loss report says so wherever it has none. Nothing is dropped silently.

The origin rule (see :class:`~polystream.events.SignatureDelta`): a carrier records the
dialect a signature belongs to, a signature that travels further keeps its first
origin, and the dialect it belongs to writes it natively again (back in A it is a plain
native signature, not a carrier)."""

from __future__ import annotations

from pathlib import Path

import pytest

from polystream import decode
from polystream.decoding import decode_events
from polystream.dialects import Loss
from polystream.events import SignatureDelta
from polystream.transcode import convert

from .helpers import fixture_dialect, stream_fixtures

HOPS = [
    "openai_responses",
    "openai_chat",
    "anthropic_messages",
    "gemini_generate",
    "gemini_interactions",
]


def _signatures(data: bytes, dialect: str) -> list[str]:
    return [b.signature for b in decode(data, dialect).blocks if b.signature]


def _carried_back(data: bytes, dialect: str) -> list[str]:
    """Signatures of ``data`` that its decoder read out of a carrier (not native)."""
    return [
        e.delta
        for e in decode_events(data, dialect)
        if isinstance(e, SignatureDelta) and (e.extra or {}).get("carrier")
    ]


def _dropped(losses: list[Loss]) -> list[Loss]:
    return [loss for loss in losses if "signature" in loss.what and not loss.carried]


def _through(data: bytes, source: str, hops: list[str]) -> tuple[bytes, list[Loss], list[bytes]]:
    """``data`` converted through every hop and back to ``source``: the result, the
    signature losses of every hop, and each intermediate stream."""
    dropped: list[Loss] = []
    streams = []
    current = source
    for hop in [*hops, source]:
        data, losses = convert(data, hop, source=current)
        dropped += _dropped(losses)
        streams.append(data)
        current = hop
    return data, dropped, streams[:-1]


SIGNED = [
    p
    for p in stream_fixtures()
    if p.suffix == ".sse" and _signatures(p.read_bytes(), fixture_dialect(p))
]
CASES = [(p, hop) for p in SIGNED for hop in HOPS if hop != fixture_dialect(p)]


def test_there_are_signed_fixtures_in_every_family() -> None:
    families = {fixture_dialect(p).split("_")[0] for p in SIGNED}
    assert {"openai", "anthropic", "gemini"} <= families


@pytest.mark.parametrize(
    ("path", "hop"), CASES, ids=[f"{p.parent.name}/{p.name}->{h}" for p, h in CASES]
)
def test_signatures_survive_a_hop_or_are_reported(path: Path, hop: str) -> None:
    source = fixture_dialect(path)
    original = _signatures(path.read_bytes(), source)
    there, losses = convert(path.read_bytes(), hop, source=source)
    back, _ = convert(there, source, source=hop)
    restored = _signatures(back, source)
    _check(original, restored, _dropped(losses), hop)
    # Back home, each signature is written natively (its origin is the source).
    assert _carried_back(back, source) == []


def _check(original: list[str], restored: list[str], dropped: list[Loss], hop: str) -> None:
    """Every signature came back, in order, except those whose loss was reported."""
    assert all(loss.reason for loss in dropped)  # with the event it came from
    rest = iter(original)
    assert all(any(sig == o for o in rest) for sig in restored), "a signature changed"
    missing = len(original) - len(restored)
    assert missing <= len(dropped), f"{hop} lost a signature without reporting it"


# A -> B -> C -> A: the carrier of B hands the origin to the carrier of C.
PATHS = [
    ("gemini_generate", ["openai_chat", "anthropic_messages"]),
    ("gemini_generate", ["anthropic_messages", "gemini_interactions"]),
    ("anthropic_messages", ["gemini_interactions", "openai_chat"]),
    ("anthropic_messages", ["gemini_generate", "xai_messages"]),
    ("openai_responses", ["openai_chat", "gemini_interactions"]),
    ("gemini_interactions", ["openai_chat", "gemini_generate"]),
]
MULTI = [(p, hops) for source, hops in PATHS for p in SIGNED if fixture_dialect(p) == source]


@pytest.mark.parametrize(
    ("path", "hops"),
    MULTI,
    ids=[f"{p.parent.name}/{p.name}->{'->'.join(h)}" for p, h in MULTI],
)
def test_signatures_survive_two_hops_or_are_reported(path: Path, hops: list[str]) -> None:
    source = fixture_dialect(path)
    back, dropped, _ = _through(path.read_bytes(), source, hops)
    original = _signatures(path.read_bytes(), source)
    _check(original, _signatures(back, source), dropped, "->".join(hops))
    assert _carried_back(back, source) == []


@pytest.mark.parametrize(
    "path", [p for p in SIGNED if fixture_dialect(p) == "gemini_generate"], ids=lambda p: p.name
)
def test_gemini_signatures_come_back_through_chat_and_messages(path: Path) -> None:
    # Gemini signs text and function-call parts: Chat and Messages both carry those.
    data = path.read_bytes()
    back, dropped, (chat, messages) = _through(
        data, "gemini_generate", ["openai_chat", "anthropic_messages"]
    )
    assert dropped == []
    assert _signatures(back, "gemini_generate") == _signatures(data, "gemini_generate")
    assert _carried_back(back, "gemini_generate") == []
    # The first origin travels: Messages names Gemini, not the Chat stream it read.
    assert b'"origin":"gemini_generate"' in chat
    assert b"polystream:v1:gemini_generate:" in messages
    assert b"polystream:v1:openai_chat:" not in messages


def test_xai_and_openai_state_are_not_interchangeable() -> None:
    data = next(p for p in SIGNED if fixture_dialect(p) == "xai_responses").read_bytes()
    # Directly, and after a hop through Chat (whose carrier keeps the origin), OpenAI
    # Responses refuses xAI encrypted state, and says so.
    direct, losses = convert(data, "openai_responses", source="xai_responses")
    chat, _ = convert(data, "openai_chat", source="xai_responses")
    via, via_losses = convert(chat, "openai_responses", source="openai_chat")
    for out, lost in ((direct, losses), (via, via_losses)):
        assert b"encrypted_content" not in out
        assert [loss.what for loss in _dropped(lost)] == ["signature"]
    # xAI itself writes it natively.
    home, _ = convert(chat, "xai_responses", source="openai_chat")
    assert b'"encrypted_content":' in home
    assert _signatures(home, "xai_responses") == _signatures(data, "xai_responses")


def test_a_signature_of_the_other_messages_dialect_is_carried() -> None:
    path = next(p for p in SIGNED if p.name == "thinking.sse")
    data = path.read_bytes()
    xai, losses = convert(data, "xai_messages", source="anthropic_messages")
    assert b"polystream:v1:anthropic_messages:" in xai
    assert [(loss.what, loss.carried) for loss in losses if "signature" in loss.what] == [
        ("signature", True)
    ]
    back, _ = convert(xai, "anthropic_messages", source="xai_messages")
    assert _carried_back(back, "anthropic_messages") == []
    assert _signatures(back, "anthropic_messages") == _signatures(data, "anthropic_messages")
    assert b"polystream:v1:" not in back
