"""Opaque reasoning state across a hop: A -> B -> A through polystream restores every
signature (Anthropic ``signature``, Gemini ``thoughtSignature``, OpenAI/xAI
``encrypted_content``) wherever B has a documented carrier, and B's loss report says so
wherever it has none. Nothing is dropped silently."""

from __future__ import annotations

from pathlib import Path

import pytest

from polystream import decode
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
    dropped = [loss for loss in losses if "signature" in loss.what and not loss.carried]
    if dropped:
        # Reported, with the event it came from: never silent.
        assert all(loss.reason for loss in dropped)
        return
    assert restored == original, f"{hop} lost a signature without reporting it"
