"""``polystream convert``: warnings for a source cut short or with decode errors
(``--strict``: exit 1), and a loss report that says which values the target was given
as defaults and which the target carried."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from polystream import decode
from polystream.cli import main
from polystream.dialects import Loss
from polystream.transcode import convert
from tests.helpers import FIXTURES

CHAT_OK = FIXTURES / "openai_chat" / "reply_ok.sse"
CHUNK = (
    b'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-x",'
    b'"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":null}]}\n\n'
)


def run(capsys: pytest.CaptureFixture[bytes], *argv: str) -> tuple[int, bytes, str]:
    status = main(list(argv))
    out, err = capsys.readouterr()
    return status, out, err.decode()


@pytest.mark.parametrize("strict", [False, True])
def test_a_truncated_source_is_warned_about(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes], strict: bool
) -> None:
    source = tmp_path / "cut.sse"
    source.write_bytes(CHUNK)  # (no [DONE])
    argv = ["convert", "--to", "anthropic_messages", *(["--strict"] * strict), str(source)]
    status, out, err = run(capsysbinary, *argv)
    label = "error" if strict else "warning"
    assert (status, err) == (
        1 if strict else 0,
        f"polystream: {label}: the source stream was truncated (stream ended without data: "
        "[DONE] (truncated)): the output ends where it did\n",
    )
    # The output is written either way, and ends where the source did.
    assert decode(out, "anthropic_messages").text == "ok"
    assert decode(out, "anthropic_messages").status == "truncated"


def test_decode_errors_of_the_source_are_warned_about(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    source = tmp_path / "broken.sse"
    source.write_bytes(CHUNK + b"data: {bad\n\n" + b"data: [DONE]\n\n")
    status, out, err = run(capsysbinary, "convert", "--to", "anthropic_messages", str(source))
    assert status == 0
    assert err == (
        "polystream: warning: 1 decode error(s) in the source stream were skipped (the first "
        f"at byte {len(CHUNK)}: malformed JSON in a data line: JSON is malformed: object keys must "
        "be strings (byte 1))\n"
    )
    assert decode(out, "anthropic_messages").text == "ok"
    # --strict: the error stops the conversion.
    status, _, err = run(
        capsysbinary, "convert", "--strict", "--to", "anthropic_messages", str(source)
    )
    assert status == 1 and err.startswith("polystream: error: malformed JSON in a data line")


def test_a_whole_source_gives_no_warning(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    assert run(capsysbinary, "convert", "--strict", "--to", "openai_responses", str(CHAT_OK))[
        ::2
    ] == (0, "")


def test_the_loss_report_names_defaults_and_carried_values(
    tmp_path: Path, capsysbinary: pytest.CaptureFixture[bytes]
) -> None:
    # Anthropic's stream has no creation time: Chat's `created` is a default. Chat's
    # finish_reason metadata of choice 0 is what the Finish writes: carried, not lost.
    source = FIXTURES / "anthropic_messages" / "skeleton.sse"
    report = tmp_path / "losses.json"
    argv = ["convert", "--to", "openai_chat", "--loss-report", str(report), str(source)]
    status, out, err = run(capsysbinary, *argv)
    assert (status, err) == (0, "")
    assert b'"created":0,' in out
    assert json.loads(report.read_text()) == {
        "source": "anthropic_messages",
        "target": "openai_chat",
        "losses": [
            {
                "what": "created",
                "event_index": 0,
                "event_type": "stream-start",
                "reason": "the source stream has no creation time: wrote created 0",
                "kind": "defaulted",
            },
            {
                "what": "finish_reason:stop",
                "event_index": 8,
                "event_type": "finish",
                "reason": "Chat finish_reason has no 'end_turn'",
                "carried": True,
            },
        ],
    }
    report2 = tmp_path / "back.json"
    argv = ["convert", "--to", "anthropic_messages", "--loss-report", str(report2), str(CHAT_OK)]
    assert run(capsysbinary, *argv)[::2] == (0, "")
    assert json.loads(report2.read_text())["losses"] == [
        {
            "what": "metadata:finish_reason",
            "event_index": 5,
            "event_type": "metadata",
            "reason": "candidate 0's finish reason: written as the stream's own finish reason",
            "carried": True,
        }
    ]


def test_a_finish_reason_of_another_choice_is_still_lost() -> None:
    _, losses = convert(
        (FIXTURES / "openai_chat" / "n2_choices.sse").read_bytes(), "gemini_interactions"
    )
    finish = [
        (loss.carried, loss.reason) for loss in losses if loss.what == "metadata:finish_reason"
    ]
    assert finish == [
        (True, "candidate 0's finish reason: written as the stream's own finish reason"),
        (False, "Interactions has no reply-level metadata event"),
    ]


def test_a_stream_without_identity_or_usage_gets_defaults_reported() -> None:
    from polystream.events import BlockEnd, BlockStart, Finish, FinishReason, StreamStart, TextDelta
    from polystream.transcode import encode_events

    events = [
        StreamStart(dialect="gemini_generate"),
        BlockStart(index=0, kind="text"),
        TextDelta(index=0, delta="hi"),
        BlockEnd(index=0),
        Finish(status="completed", reason=FinishReason(unified="other", raw=None)),
    ]
    defaults = {
        target: [
            (loss.what, loss.event_type)
            for loss in encode_events(events, target)[1]
            if loss.kind == "defaulted"
        ]
        for target in ("openai_responses", "openai_chat", "xai_chat", "anthropic_messages")
    }
    assert defaults == {
        "openai_responses": [
            ("id", "stream-start"),
            ("created_at", "stream-start"),
            ("model", "stream-start"),
        ],
        "openai_chat": [
            ("id", "stream-start"),
            ("created", "stream-start"),
            ("model", "stream-start"),
        ],
        # (xAI's own streams say created 0: no default)
        "xai_chat": [("id", "stream-start"), ("model", "stream-start")],
        "anthropic_messages": [
            ("id", "stream-start"),
            ("model", "stream-start"),
            ("usage", "finish"),
            ("stop_reason", "finish"),
        ],
    }
    _, losses = encode_events(events, "anthropic_messages")
    assert {loss.kind for loss in losses} == {"defaulted"}
    assert losses[-1].reason == "the source stream gives no finish reason (other): wrote end_turn"
    # A reason the source did have, which Messages has no word for, is a loss.
    named = [
        *events[:-1],
        Finish(status="completed", reason=FinishReason(unified="other", raw="x")),
    ]
    assert [
        (loss.what, loss.kind, loss.reason)
        for loss in encode_events(named, "anthropic_messages")[1]
        if loss.what == "finish_reason"
    ] == [
        ("finish_reason", "lost", "Messages has no stop_reason for 'other' ('x'): wrote end_turn")
    ]


def test_describe_says_carried_and_defaulted() -> None:
    def loss(**fields: object) -> Loss:
        return Loss(what="w", event_index=0, event_type="t", reason="r", **fields)  # type: ignore[arg-type]

    assert [
        loss().describe(),
        loss(carried=True).describe(),
        loss(kind="defaulted").describe(),
    ] == [
        "w",
        "w (carried)",
        "w (defaulted)",
    ]
