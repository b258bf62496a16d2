"""Real provider calls. Each test runs only when its provider's key is set, and is
skipped otherwise (never faked)."""

from __future__ import annotations

import os

import pytest

from polystream.client import Client

CASES = [
    ("openai_responses", "OPENAI_API_KEY", "gpt-5.4-nano"),
    ("openai_chat", "OPENAI_API_KEY", "gpt-5.4-nano"),
    ("anthropic_messages", "ANTHROPIC_API_KEY", "claude-haiku-4-5-20251001"),
    ("xai_responses", "XAI_API_KEY", "grok-4.3"),
    ("xai_chat", "XAI_API_KEY", "grok-4.3"),
    ("gemini_generate", "GEMINI_API_KEY", "gemini-3.5-flash-lite"),
]


@pytest.mark.live
@pytest.mark.parametrize(("dialect", "env", "model"), CASES)
def test_reply_with_ok(dialect: str, env: str, model: str) -> None:
    if not os.environ.get(env):
        pytest.skip(f"{env} is not set")
    with Client() as client:
        stream = client.stream(dialect, model=model, prompt="Reply with OK.", max_tokens=64)
        events = list(stream)
        result = stream.result()
    assert events and result.status in ("completed", "incomplete")
    assert "OK" in result.text.upper()
    assert result.usage.input_tokens and result.usage.output_tokens
