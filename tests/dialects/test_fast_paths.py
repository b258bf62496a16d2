"""The dialect decoders' fast paths against their general paths.

Responses, Chat, Messages and Interactions decode their most frequent events through a
fast path. For any input and any chunking it must give exactly what the general path
gives: the same events (every field, ``extra`` with its key order, the cursor), the
same errors at the same place, strict or tolerant, and the same ``last_cursor``. A
decoder class with ``_fast_paths = False`` takes the general path for every event.

The inputs: every fixture of those dialects, hand-picked variants of the hot payloads
(extra, missing and mistyped fields, other key orders and spacing, unknown events,
events out of order or out of sequence), and hypothesis mixes and mutations of them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from polystream import decode
from polystream.dialects import get_dialect
from polystream.dialects._base import FramedDecoder
from polystream.errors import PolystreamError
from polystream.events import ErrorEvent
from tests.helpers import split_at, stream_fixtures

DIALECTS = (
    "openai_responses",
    "xai_responses",
    "openai_chat",
    "xai_chat",
    "anthropic_messages",
    "xai_messages",
    "gemini_interactions",
)


def _classes(dialect: str) -> tuple[type[FramedDecoder], type[FramedDecoder]]:
    fast = type(get_dialect(dialect).decoder())
    assert issubclass(fast, FramedDecoder)
    general = type(f"General{fast.__name__}", (fast,), {"_fast_paths": False})
    return fast, general


def _run(cls: type[FramedDecoder], chunks: list[bytes], **options: Any) -> Any:
    """Everything observable: each event encoded (key order included), the error
    raised (type, message, location), and the last cursor."""
    decoder = cls(**options)
    events: list[Any] = []
    error = None
    try:
        for chunk in chunks:
            events.extend(decoder.feed(chunk))
        events.extend(decoder.close())
    except PolystreamError as exc:
        error = (
            type(exc).__name__,
            str(exc),
            getattr(exc, "event_index", None),
            getattr(exc, "byte_offset", None),
        )
    return [msgspec.json.encode(event) for event in events], events, error, decoder.last_cursor


def assert_same(dialect: str, data: bytes, *, seed: int = 0, splits: int = 3) -> None:
    """Fast and general paths agree on ``data``, tolerant and strict, whole, byte by
    byte (small inputs) and at random cuts."""
    fast, general = _classes(dialect)
    rng = random.Random(seed)
    chunkings = [[data]]
    if len(data) <= 4000:
        chunkings.append([data[i : i + 1] for i in range(len(data))])
    for _ in range(splits):
        cuts = [rng.randrange(len(data) + 1) for _ in range(rng.randrange(1, 8))]
        chunkings.append(split_at(data, cuts))
    for strict in (False, True):
        expected = _run(general, [data], strict=strict)
        for chunks in chunkings:
            got = _run(fast, chunks, strict=strict)
            assert got[0] == expected[0], (strict, [len(c) for c in chunks])
            assert got[1] == expected[1]
            assert got[2:] == expected[2:]


def test_the_switch_forces_the_general_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The switch is read when a decoder is made; with it off, every delta goes through
    the general path's handler (with it on, the fast path spares most of them)."""
    for dialect, handler in (
        ("openai_responses", "_text_delta"),
        ("openai_chat", "_chunk"),
        ("anthropic_messages", "_delta"),
        ("gemini_interactions", "_on_delta"),
    ):
        fast, general = _classes(dialect)
        original = getattr(fast, handler)
        calls: list[None] = []

        def spy(self: Any, *args: Any, _original: Any = original, _calls: Any = calls) -> Any:
            _calls.append(None)
            return _original(self, *args)

        monkeypatch.setattr(fast, handler, spy)
        data = _text_stream(dialect, repeat=20)
        assert _run(general, [data])[0] == _run(fast, [data])[0]
        calls.clear()
        _run(general, [data])
        general_calls = len(calls)
        calls.clear()
        _run(fast, [data])
        assert general_calls >= 20 > len(calls) + 15, dialect


# -- the fixtures ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [p for d in DIALECTS for p in stream_fixtures(d) if p.suffix == ".sse"]
    + [
        p
        for d in DIALECTS
        for p in sorted((Path(__file__).parent.parent / "fixtures" / d / "bad").glob("*.sse"))
    ],
    ids=lambda p: f"{p.parent.name}/{p.name}" if p.parent.name == "bad" else p.name,
)
def test_fixtures_give_the_same_events(path: Path) -> None:
    dialect = path.parent.name if path.parent.name != "bad" else path.parent.parent.name
    assert_same(dialect, path.read_bytes(), seed=len(path.name))


# -- hand-picked streams -------------------------------------------------------------------


def _sse(name: str | None, payload: Any, *, raw: str | None = None) -> bytes:
    data = raw if raw is not None else json.dumps(payload, separators=(",", ":"))
    head = f"event: {name}\n" if name is not None else ""
    return f"{head}data: {data}\n\n".encode()


# Responses ----------------------------------------------------------------------------------

_MSG = "msg_68b1f0c2d4e6f8a0b2c4d6e8f0a2c4e6f8a0b2c4d6e8f001"
_FC = "fc_68b1f0c2d4e6f8a0b2c4d6e8f0a2c4e6f8a0b2c4d6e8f002"
_RS = "rs_68b1f0c2d4e6f8a0b2c4d6e8f0a2c4e6f8a0b2c4d6e8f003"
_TEXT = "response.output_text.delta"
_ARGS = "response.function_call_arguments.delta"
_SUMMARY = "response.reasoning_summary_text.delta"
_REASONING = "response.reasoning_text.delta"


def _responses_head() -> list[tuple[str, dict[str, Any]]]:
    response = {"id": "resp_1", "object": "response", "created_at": 1, "model": "m", "output": []}
    return [
        ("response.created", {"type": "response.created", "response": response}),
        (
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "output_index": 0,
                "item": {"id": _RS, "type": "reasoning", "summary": []},
            },
        ),
        (
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "output_index": 1,
                "item": {"id": _FC, "type": "function_call", "name": "f", "call_id": "c1"},
            },
        ),
        (
            "response.output_item.added",
            {
                "type": "response.output_item.added",
                "output_index": 2,
                "item": {"id": _MSG, "type": "message", "status": "in_progress", "content": []},
            },
        ),
        (
            "response.content_part.added",
            {
                "type": "response.content_part.added",
                "item_id": _MSG,
                "output_index": 2,
                "content_index": 0,
                "part": {"type": "output_text", "annotations": [], "text": ""},
            },
        ),
    ]


def _text_delta(delta: str = "Hi") -> dict[str, Any]:
    return {
        "type": _TEXT,
        "item_id": _MSG,
        "output_index": 2,
        "content_index": 0,
        "delta": delta,
        "logprobs": [],
        "obfuscation": "abc",
    }


def _args_delta(delta: str = '{"a') -> dict[str, Any]:
    return {"type": _ARGS, "item_id": _FC, "output_index": 1, "delta": delta, "obfuscation": "x"}


def _summary_delta(delta: str = "think") -> dict[str, Any]:
    return {
        "type": _SUMMARY,
        "item_id": _RS,
        "output_index": 0,
        "summary_index": 0,
        "delta": delta,
        "obfuscation": "y",
    }


def _reasoning_delta(delta: str = "deep") -> dict[str, Any]:
    return {
        "type": _REASONING,
        "item_id": _RS,
        "output_index": 0,
        "content_index": 0,
        "delta": delta,
    }


def _responses_tail() -> list[tuple[str, dict[str, Any]]]:
    return [
        (
            "response.content_part.done",
            {
                "type": "response.content_part.done",
                "item_id": _MSG,
                "output_index": 2,
                "content_index": 0,
                "part": {"type": "output_text", "text": "Hi"},
            },
        ),
        (
            "response.output_item.done",
            {
                "type": "response.output_item.done",
                "output_index": 1,
                "item": {
                    "id": _FC,
                    "type": "function_call",
                    "arguments": "{}",
                    "status": "completed",
                },
            },
        ),
        (
            "response.completed",
            {"type": "response.completed", "response": {"id": "resp_1", "status": "completed"}},
        ),
    ]


def _responses_stream(middle: list[bytes], *, tail: bool = True, tail_seq: int = 1000) -> bytes:
    """Head events (sequence 0-4), the given wire events (sequence numbers as their
    payloads say), and the tail events (from ``tail_seq`` on)."""
    out = [
        _sse(name, {"type": payload["type"], "sequence_number": seq, **payload})
        for seq, (name, payload) in enumerate(_responses_head())
    ]
    out.extend(middle)
    if tail:
        out.extend(
            _sse(name, {"type": payload["type"], "sequence_number": seq, **payload})
            for seq, (name, payload) in enumerate(_responses_tail(), tail_seq)
        )
    return b"".join(out)


def _seq(payload: dict[str, Any], seq: Any, *, at: int = 1) -> dict[str, Any]:
    """``payload`` with ``sequence_number`` inserted at position ``at``."""
    items = list(payload.items())
    items.insert(at, ("sequence_number", seq))
    return dict(items)


def _responses_variants() -> dict[str, list[bytes]]:
    text = _text_delta()
    base = [_sse(_TEXT, _seq(text, 5)), _sse(_TEXT, _seq(_text_delta(" there"), 6))]
    v: dict[str, list[bytes]] = {
        "canonical": base,
        "every_hot_kind": [
            _sse(_SUMMARY, _seq(_summary_delta(), 5)),
            _sse(_REASONING, _seq(_reasoning_delta(), 6)),
            _sse(_ARGS, _seq(_args_delta(), 7)),
            _sse(_TEXT, _seq(text, 8)),
        ],
        "extra_field_end": [_sse(_TEXT, _seq({**text, "zz": [1, {"a": None}]}, 5))],
        "extra_field_first": [_sse(_TEXT, _seq({"aa": 1, **text}, 5, at=2))],
        "sequence_last": [_sse(_TEXT, _seq(text, 5, at=len(text)))],
        "delta_first": [_sse(_TEXT, _seq({"delta": "x", **text}, 5))],
        "no_sequence": [_sse(_TEXT, text), _sse(_TEXT, _seq(text, 6))],
        "sequence_gap": [_sse(_TEXT, _seq(text, 9)), _sse(_TEXT, _seq(text, 10))],
        "sequence_repeat": [_sse(_TEXT, _seq(text, 5)), _sse(_TEXT, _seq(text, 5))],
        "sequence_back": [_sse(_TEXT, _seq(text, 5)), _sse(_TEXT, _seq(text, 3))],
        "sequence_str": [_sse(_TEXT, _seq(text, "5"))],
        "sequence_float": [_sse(_TEXT, _seq(text, 5.0))],
        "sequence_bool": [_sse(_TEXT, _seq(text, True))],
        "sequence_null": [_sse(_TEXT, _seq(text, None))],
        "delta_int": [_sse(_TEXT, _seq({**text, "delta": 3}, 5))],
        "delta_null": [_sse(_TEXT, _seq({**text, "delta": None}, 5))],
        "delta_missing": [_sse(_TEXT, _seq({k: v for k, v in text.items() if k != "delta"}, 5))],
        "delta_empty": [_sse(_TEXT, _seq({**text, "delta": ""}, 5))],
        "delta_escapes": [_sse(_TEXT, _seq({**text, "delta": 'a"\\\n\u00e9\U0001f600'}, 5))],
        "item_unknown": [_sse(_TEXT, _seq({**text, "item_id": "msg_other"}, 5))],
        "item_null": [_sse(_TEXT, _seq({**text, "item_id": None}, 5))],
        "item_list": [_sse(_TEXT, _seq({**text, "item_id": [1]}, 5))],
        "item_object": [_sse(_TEXT, _seq({**text, "item_id": {"a": 1}}, 5))],
        "item_missing": [_sse(_TEXT, _seq({k: v for k, v in text.items() if k != "item_id"}, 5))],
        "content_index_other": [_sse(_TEXT, _seq({**text, "content_index": 1}, 5))],
        "content_index_bool": [_sse(_TEXT, _seq({**text, "content_index": False}, 5))],
        "content_index_str": [_sse(_TEXT, _seq({**text, "content_index": "0"}, 5))],
        "content_index_missing": [
            _sse(_TEXT, _seq({k: v for k, v in text.items() if k != "content_index"}, 5))
        ],
        "no_event_name": [_sse(None, _seq(text, 5)), _sse(_TEXT, _seq(text, 6))],
        "name_mismatch": [_sse(_ARGS, _seq(text, 5))],
        "type_missing": [
            _sse(_TEXT, _seq({k: v for k, v in text.items() if k != "type"}, 5, at=0))
        ],
        "type_int": [_sse(_TEXT, _seq({**text, "type": 7}, 5))],
        "payload_list": [_sse(_TEXT, None, raw="[1,2]")],
        "payload_string": [_sse(_TEXT, None, raw='"x"')],
        "malformed": [_sse(_TEXT, None, raw='{"type":"response.output_text.delta",')],
        "spaced_json": [_sse(_TEXT, None, raw=json.dumps(_seq(text, 5)))],
        "duplicate_key": [
            _sse(
                _TEXT,
                None,
                raw=json.dumps(_seq(text, 5), separators=(",", ":"))[:-1] + ',"delta":"again"}',
            )
        ],
        "args_on_message": [_sse(_ARGS, _seq({**_args_delta(), "item_id": _MSG}, 5))],
        "text_on_function_call": [_sse(_TEXT, _seq({**text, "item_id": _FC}, 5))],
        "reasoning_no_part": [
            _sse(
                _SUMMARY,
                _seq({k: v for k, v in _summary_delta().items() if k != "summary_index"}, 5),
            ),
            _sse(_REASONING, _seq({**_reasoning_delta(), "content_index": "0"}, 6)),
        ],
        "refusal_delta": [
            _sse("response.refusal.delta", _seq({**text, "type": "response.refusal.delta"}, 5))
        ],
        "unknown_event": [
            _sse("response.brand_new", {"type": "response.brand_new", "sequence_number": 5})
        ],
        "keepalive": [_sse("keepalive", {"type": "keepalive", "sequence_number": 5})],
    }
    return v


def _after_done_variants() -> dict[str, bytes]:
    """Deltas after their block ended, and after the terminal event."""
    text = _text_delta()
    return {
        "after_part_done": _responses_stream([], tail=True)
        + _sse(_TEXT, _seq(text, 1003))
        + _sse(_ARGS, _seq(_args_delta(), 1004)),
        "after_item_done": _responses_stream([_sse(_ARGS, _seq(_args_delta(), 5))], tail=False)
        + _sse(
            "response.output_item.done",
            {
                "type": "response.output_item.done",
                "sequence_number": 6,
                "output_index": 1,
                "item": {"id": _FC, "type": "function_call", "arguments": "{}"},
            },
        )
        + _sse(_ARGS, _seq(_args_delta(), 7)),
        "before_any_item": b"".join(
            [
                _sse("response.created", _seq(_responses_head()[0][1], 0)),
                _sse(_TEXT, _seq(text, 1)),
            ]
        ),
        "resumed_without_created": _sse(_TEXT, _seq(text, 40)) + _sse(_TEXT, _seq(text, 41)),
    }


@pytest.mark.parametrize("case", sorted(_responses_variants()))
@pytest.mark.parametrize("dialect", ["openai_responses", "xai_responses"])
def test_responses_variants(dialect: str, case: str) -> None:
    assert_same(dialect, _responses_stream(_responses_variants()[case]), seed=len(case))


@pytest.mark.parametrize("case", sorted(_after_done_variants()))
def test_responses_out_of_order(case: str) -> None:
    assert_same("openai_responses", _after_done_variants()[case], seed=len(case))


def test_responses_keep_raw_is_the_general_path() -> None:
    data = _responses_stream(_responses_variants()["canonical"])
    fast, general = _classes("openai_responses")
    assert _run(fast, [data], keep_raw=True)[:3] == _run(general, [data], keep_raw=True)[:3]


# Responses runs: consecutive deltas of one block (ResponsesDecoder._dispatch_sse) ----------

_HOT_KINDS: dict[str, tuple[str, Callable[[], dict[str, Any]]]] = {
    "text": (_TEXT, _text_delta),
    "args": (_ARGS, _args_delta),
    "summary": (_SUMMARY, _summary_delta),
    "reasoning": (_REASONING, _reasoning_delta),
}


def _compact(payload: Any) -> str:
    return json.dumps(payload, separators=(",", ":"))


def _run_mutations() -> dict[str, Callable[[str, dict[str, Any]], list[bytes]]]:
    """Ways to replace the second delta of a run: (event name, its payload with
    ``sequence_number`` 6) -> the wire events in its place."""

    def put(key: str, value: Any) -> Callable[[str, dict[str, Any]], list[bytes]]:
        return lambda n, p: [_sse(n, {**p, key: value})]

    def drop(key: str) -> Callable[[str, dict[str, Any]], list[bytes]]:
        return lambda n, p: [_sse(n, {k: v for k, v in p.items() if k != key})]

    def before(event: bytes) -> Callable[[str, dict[str, Any]], list[bytes]]:
        return lambda n, p: [event, _sse(n, {**p, "sequence_number": 7})]

    part_done = {
        "type": "response.content_part.done",
        "sequence_number": 6,
        "item_id": _MSG,
        "output_index": 2,
        "content_index": 0,
        "part": {"type": "output_text", "text": "Hi"},
    }
    item_done = {
        "type": "response.output_item.done",
        "sequence_number": 6,
        "output_index": 1,
        "item": {"id": _FC, "type": "function_call", "arguments": "{}"},
    }
    item_added = {
        "type": "response.output_item.added",
        "sequence_number": 6,
        "output_index": 3,
        "item": {"id": "fc_other", "type": "function_call", "name": "g", "call_id": "c2"},
    }
    completed = {
        "type": "response.completed",
        "sequence_number": 6,
        "response": {"id": "resp_1", "status": "completed"},
    }
    return {
        "same": lambda n, p: [_sse(n, p)],
        "item_other": put("item_id", _FC),
        "item_message": put("item_id", _MSG),
        "item_unknown": put("item_id", "msg_other"),
        "item_null": put("item_id", None),
        "item_list": put("item_id", [1]),
        "item_missing": drop("item_id"),
        "ci_other": put("content_index", 1),
        "ci_true": put("content_index", True),
        "ci_false": put("content_index", False),
        "ci_float": put("content_index", 0.0),
        "ci_str": put("content_index", "0"),
        "ci_missing": drop("content_index"),
        "si_other": put("summary_index", 1),
        "si_false": put("summary_index", False),
        "si_missing": drop("summary_index"),
        "seq_gap": put("sequence_number", 7),
        "seq_repeat": put("sequence_number", 5),
        "seq_back": put("sequence_number", 3),
        "seq_str": put("sequence_number", "6"),
        "seq_float": put("sequence_number", 6.0),
        "seq_true": put("sequence_number", True),
        "seq_null": put("sequence_number", None),
        "seq_missing": drop("sequence_number"),
        "delta_int": put("delta", 3),
        "delta_null": put("delta", None),
        "delta_list": put("delta", ["x"]),
        "delta_missing": drop("delta"),
        "delta_empty": put("delta", ""),
        "delta_escapes": put("delta", 'a"\\\n\t\u00e9\U0001f600\u2028'),
        "type_other": lambda n, p: [_sse(n, {**p, "type": _SUMMARY if n != _SUMMARY else _TEXT})],
        "type_null": put("type", None),
        "type_missing": drop("type"),
        "name_other": lambda n, p: [_sse(_ARGS if n != _ARGS else _TEXT, p)],
        "name_none": lambda n, p: [_sse(None, p)],
        "payload_list": lambda n, p: [_sse(n, None, raw="[1,2]")],
        "payload_string": lambda n, p: [_sse(n, None, raw='"x"')],
        "payload_null": lambda n, p: [_sse(n, None, raw="null")],
        "malformed": lambda n, p: [_sse(n, None, raw=_compact(p)[:-1])],
        "empty_data": lambda n, p: [_sse(n, None, raw="")],
        "extra_first": lambda n, p: [_sse(n, {"aa": [1, {"b": None}], **p})],
        "extra_last": put("zz", {"a": [1]}),
        "delta_first": lambda n, p: [_sse(n, {"delta": p["delta"], **p})],
        "sequence_last": lambda n, p: [
            _sse(
                n, {**{k: v for k, v in p.items() if k != "sequence_number"}, "sequence_number": 6}
            )
        ],
        "spaced": lambda n, p: [_sse(n, None, raw=json.dumps(p))],
        "duplicate_delta": lambda n, p: [_sse(n, None, raw=_compact(p)[:-1] + ',"delta":"2"}')],
        "duplicate_item": lambda n, p: [
            _sse(n, None, raw=_compact(p)[:-1] + ',"item_id":"msg_other"}')
        ],
        "duplicate_sequence": lambda n, p: [
            _sse(n, None, raw=_compact(p)[:-1] + ',"sequence_number":9}')
        ],
        "duplicate_type": lambda n, p: [_sse(n, None, raw=_compact(p)[:-1] + ',"type":"x"}')],
        "comment_before": lambda n, p: [b": ping\n\n", _sse(n, p)],
        "id_and_retry": lambda n, p: [b"id: 7\nretry: 50\n" + _sse(n, p)],
        "unknown_before": before(_sse("response.brand_new", {"type": "response.brand_new"})),
        "keepalive_before": before(_sse("keepalive", {"type": "keepalive", "sequence_number": 6})),
        "part_done_before": before(_sse("response.content_part.done", part_done)),
        "item_done_before": before(_sse("response.output_item.done", item_done)),
        "item_added_before": before(_sse("response.output_item.added", item_added)),
        "completed_before": before(_sse("response.completed", completed)),
        "other_kind_before": before(_sse(_REASONING, _seq(_reasoning_delta(), 6))),
    }


def _run_stream(kind: str, mutation: str, *, tail: bool = True) -> bytes:
    """A run of deltas of ``kind`` (sequence 5 on) whose second delta is mutated."""
    name, make = _HOT_KINDS[kind]
    first = _sse(name, _seq(make(), 5))
    middle = _run_mutations()[mutation](name, _seq(make(), 6))
    rest = [_sse(name, _seq(make(), seq)) for seq in (7, 8, 9)]
    return _responses_stream([first, *middle, *rest], tail=tail, tail_seq=10)


@pytest.mark.parametrize("mutation", sorted(_run_mutations()))
@pytest.mark.parametrize("kind", sorted(_HOT_KINDS))
def test_responses_runs(kind: str, mutation: str) -> None:
    """A run broken at its second delta in every way gives what the general path gives."""
    assert_same("openai_responses", _run_stream(kind, mutation), seed=len(mutation), splits=2)


@pytest.mark.parametrize("mutation", ["same", "seq_gap", "malformed", "part_done_before"])
@pytest.mark.parametrize("dialect", ["openai_responses", "xai_responses"])
def test_responses_runs_truncated(dialect: str, mutation: str) -> None:
    """Without the terminal event, the truncated Finish names the last event decoded
    (a run records the frame location when it ends)."""
    assert_same(dialect, _run_stream("text", mutation, tail=False), seed=3)


def test_responses_runs_take_the_deltas() -> None:
    """After the first delta of a block, the following ones take the run: no handler,
    and not even the hot path of _on_payload."""
    fast, _ = _classes("openai_responses")
    calls: list[str] = []

    class Spy(fast):  # type: ignore[valid-type,misc]
        def _on_payload(self, event: Any, payload: Any, out: list[Any]) -> None:
            calls.append(event.event)
            super()._on_payload(event, payload, out)

    deltas = [_sse(_TEXT, _seq(_text_delta(str(i)), 5 + i)) for i in range(50)]
    events = _run(Spy, [_responses_stream(deltas, tail_seq=55)])[1]
    assert calls.count(_TEXT) == 1
    assert [e.cursor for e in events if type(e).__name__ == "TextDelta"] == list(range(5, 55))


# Chat ---------------------------------------------------------------------------------------

_ENVELOPE: dict[str, Any] = {
    "id": "chatcmpl-1",
    "object": "chat.completion.chunk",
    "created": 1764460800,
    "model": "gpt-5.4-nano",
    "service_tier": "default",
    "system_fingerprint": "fp_1",
}


def _chunk(delta: dict[str, Any], obf: str | None = "Xq3", **choice: Any) -> dict[str, Any]:
    chunk: dict[str, Any] = dict(_ENVELOPE)
    chunk["choices"] = [
        {"index": 0, "delta": delta, "logprobs": None, "finish_reason": None, **choice}
    ]
    chunk["usage"] = None
    if obf is not None:
        chunk["obfuscation"] = obf
    return chunk


def _data(chunk: Any) -> bytes:
    return _sse(None, chunk)


def _chat_stream(middle: list[bytes], *, tools: bool = False) -> bytes:
    if tools:
        first = {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "index": 0,
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "f", "arguments": ""},
                }
            ],
        }
    else:
        first = {"role": "assistant", "content": "", "refusal": None}
    head = _data(_chunk(first)) + _data(_chunk({"content": "A"} if not tools else _call("{")))
    end = _data(_chunk({}, finish_reason="stop")) + b"data: [DONE]\n\n"
    return head + b"".join(middle) + end


def _call(args: str, index: int = 0, **more: Any) -> dict[str, Any]:
    return {"tool_calls": [{"index": index, "function": {"arguments": args}, **more}]}


def _chat_variants() -> dict[str, tuple[list[bytes], bool]]:
    text = _chunk({"content": "B"})
    compact = json.dumps(text, separators=(",", ":"))
    return {
        "canonical": ([_data(text), _data(_chunk({"content": "C"}, obf="Xq3"))], False),
        "obfuscation_changes": ([_data(_chunk({"content": "B"}, obf="zz"))], False),
        "obfuscation_vanishes": ([_data(_chunk({"content": "B"}, obf=None))], False),
        "obfuscation_int": ([_data({**text, "obfuscation": 5})], False),
        "extra_key_end": ([_data({**text, "x_groq": {"id": "q"}})], False),
        "extra_key_first": ([_data({"x": 1, **text})], False),
        "extra_key_in_choice": (
            [_data(_chunk({"content": "B"}, extra_choice=1))],
            False,
        ),
        "extra_key_in_delta": ([_data(_chunk({"content": "B", "audio": None}))], False),
        "choices_first": (
            [
                _data(
                    {
                        "choices": text["choices"],
                        **{k: v for k, v in text.items() if k != "choices"},
                    }
                )
            ],
            False,
        ),
        "obfuscation_before_choices": (
            [
                _data(
                    {
                        **_ENVELOPE,
                        "obfuscation": "Xq3",
                        "choices": text["choices"],
                        "usage": None,
                    }
                )
            ],
            False,
        ),
        "model_after_choices": (
            [
                _data(
                    {
                        **{k: v for k, v in _ENVELOPE.items() if k != "model"},
                        "choices": text["choices"],
                        "usage": None,
                        "obfuscation": "Xq3",
                        "model": "gpt-5.4-nano",
                    }
                ),
                _data(
                    {
                        **{k: v for k, v in _ENVELOPE.items() if k != "model"},
                        "choices": text["choices"],
                        "usage": None,
                        "obfuscation": "Xq3",
                    }
                ),
            ],
            False,
        ),
        "model_missing_then_back": (
            [_data({k: v for k, v in text.items() if k != "model"}), _data(text), _data(text)],
            False,
        ),
        "model_changes": ([_data({**text, "model": "other"}), _data(text)], False),
        "id_escaped": (
            [_sse(None, None, raw=compact.replace('"chatcmpl-1"', '"chatcmpl-\\u0031"'))] * 2
            + [_data(text)],
            False,
        ),
        "id_int": ([_data({**text, "id": 1}), _data({**text, "id": 1}), _data(text)], False),
        "created_float": ([_data({**text, "created": 1764460800.0}), _data(text)], False),
        "created_str": ([_data({**text, "created": "1764460800"})] * 2 + [_data(text)], False),
        "fingerprint_object": ([_data({**text, "system_fingerprint": {"a": [1]}})] * 2, False),
        "usage_missing": (
            [_data({k: v for k, v in text.items() if k != "usage"}), _data(text)],
            False,
        ),
        "usage_set": ([_data({**text, "usage": {"prompt_tokens": 1}}), _data(text)], False),
        "spaced_json": ([_sse(None, None, raw=json.dumps(text)), _data(text)], False),
        "tail_duplicate_choices": (
            [_sse(None, None, raw=compact[:-1] + ',"choices":[]}'), _data(text)],
            False,
        ),
        "tail_duplicate_id": (
            [_sse(None, None, raw=compact[:-1] + ',"id":"other"}'), _data(text)],
            False,
        ),
        "tail_trailing_space": ([_sse(None, None, raw=compact + " "), _data(text)], False),
        "tail_malformed": ([_sse(None, None, raw=compact[:-1])], False),
        "two_choices": (
            [_data({**text, "choices": text["choices"] + [{**text["choices"][0], "index": 1}]})],
            False,
        ),
        "choice_unknown_index": (
            [_data({**text, "choices": [{**text["choices"][0], "index": 3}]})],
            False,
        ),
        "choice_index_bool": (
            [_data({**text, "choices": [{**text["choices"][0], "index": False}]})],
            False,
        ),
        "logprobs_set": (
            [_data(_chunk({"content": "B"}, logprobs={"content": []})), _data(text)],
            False,
        ),
        "logprobs_missing": (
            [
                _data(
                    {
                        **text,
                        "choices": [{"index": 0, "delta": {"content": "B"}, "finish_reason": None}],
                    }
                )
            ],
            False,
        ),
        "finish_reason": ([_data(_chunk({"content": "B"}, finish_reason="length"))], False),
        "content_empty": ([_data(_chunk({"content": ""})), _data(text)], False),
        "content_null": ([_data(_chunk({"content": None})), _data(text)], False),
        "content_int": ([_data(_chunk({"content": 1}))], False),
        "role_again": ([_data(_chunk({"role": "assistant", "content": "B"}))], False),
        "reasoning": (
            [_data(_chunk({"reasoning_content": "r"})), _data(_chunk({"reasoning_content": "s"}))],
            False,
        ),
        "reasoning_and_content": (
            [_data(_chunk({"reasoning_content": "r", "content": "c"}))],
            False,
        ),
        "refusal": ([_data(_chunk({"refusal": "no"})), _data(text)], False),
        "event_name": ([_sse("chunk", text), _sse("chunk", text), _data(text)], False),
        "error_line": ([_data({"error": {"message": "boom", "type": "server_error"}})], False),
        "unknown_object": ([_data({"type": "keepalive"}), _data(text)], False),
        "payload_list": ([_sse(None, None, raw="[1]"), _data(text)], False),
        "usage_chunk_midway": (
            [_data({**_ENVELOPE, "choices": [], "usage": {"prompt_tokens": 2}}), _data(text)],
            False,
        ),
        "tool_canonical": ([_data(_chunk(_call("a"))), _data(_chunk(_call("b")))], True),
        "tool_empty_args": ([_data(_chunk(_call(""))), _data(_chunk(_call("b")))], True),
        "tool_with_id": ([_data(_chunk(_call("a", id="call_1")))], True),
        "tool_new_id": ([_data(_chunk(_call("a", id="call_2"))), _data(_chunk(_call("b")))], True),
        "tool_with_type": ([_data(_chunk(_call("a", type="function")))], True),
        "tool_unknown_index": ([_data(_chunk(_call("a", index=4)))], True),
        "tool_two_calls": (
            [
                _data(
                    _chunk(
                        {"tool_calls": _call("a")["tool_calls"] + _call("b", index=1)["tool_calls"]}
                    )
                )
            ],
            True,
        ),
        "tool_name_again": (
            [
                _data(
                    _chunk(
                        {"tool_calls": [{"index": 0, "function": {"name": "g", "arguments": "x"}}]}
                    )
                )
            ],
            True,
        ),
        "tool_args_int": (
            [_data(_chunk({"tool_calls": [{"index": 0, "function": {"arguments": 1}}]}))],
            True,
        ),
        "tool_then_text": (
            [_data(_chunk(_call("a"))), _data(text), _data(_chunk(_call("b")))],
            True,
        ),
        "tool_no_index": (
            [_data(_chunk({"tool_calls": [{"function": {"arguments": "a"}}]}))],
            True,
        ),
    }


@pytest.mark.parametrize("case", sorted(_chat_variants()))
@pytest.mark.parametrize("dialect", ["openai_chat", "xai_chat"])
def test_chat_variants(dialect: str, case: str) -> None:
    middle, tools = _chat_variants()[case]
    assert_same(dialect, _chat_stream(middle, tools=tools), seed=len(case))


def _openings() -> dict[str, bytes]:
    """Each envelope variant on the chunk that opens the choice (the role, an empty
    content, a null refusal: OpenAI's first chunk), then the first texts. The decoder
    learns the envelope from that general chunk, and the first text opens its block on
    the fast path."""
    role = {"role": "assistant", "content": "", "refusal": None}
    out: dict[str, bytes] = {}
    for case, (middle, tools) in _chat_variants().items():
        if tools:
            continue
        first = middle[0].decode()
        payload = first[len("data: ") :].strip()
        try:
            chunk = json.loads(payload)
        except ValueError:
            continue
        if not isinstance(chunk, dict) or not isinstance(chunk.get("choices"), list):
            continue
        if not chunk["choices"]:
            continue
        choice = chunk["choices"][0]
        if not isinstance(choice, dict) or "delta" not in choice:
            continue
        raw = payload.replace(json.dumps(choice["delta"], separators=(",", ":")), "", 1)
        opening = json.dumps({**chunk, "choices": [{**choice, "delta": role}]})
        if raw != payload:  # the variant's own spelling kept (escapes, key order)
            opening = payload.replace(
                json.dumps(choice["delta"], separators=(",", ":")),
                json.dumps(role, separators=(",", ":")),
                1,
            )
        texts = [_data(_chunk({"content": c})) for c in "ABC"]
        end = _data(_chunk({}, finish_reason="stop")) + b"data: [DONE]\n\n"
        out[case] = _sse(None, None, raw=opening) + b"".join(texts) + end
    return out


@pytest.mark.parametrize("case", sorted(_openings()))
@pytest.mark.parametrize("dialect", ["openai_chat", "xai_chat"])
def test_chat_first_text_after_the_role_chunk(dialect: str, case: str) -> None:
    assert_same(dialect, _openings()[case], seed=len(case))


def test_chat_first_text_takes_the_fast_path() -> None:
    """After OpenAI's role chunk, the first text (which opens the block) and the texts
    after it are not handled by the general path: only the role and finish chunks are."""
    fast, _ = _classes("openai_chat")
    general: list[Any] = []

    class Spy(fast):  # type: ignore[valid-type,misc]
        def _chunk(self, obj: Any, event: Any, out: list[Any]) -> None:
            general.append(obj["choices"][0]["delta"])
            super()._chunk(obj, event, out)

    role = {"role": "assistant", "content": "", "refusal": None}
    texts = [_data(_chunk({"content": c})) for c in "ABC"]
    end = _data(_chunk({}, finish_reason="stop")) + b"data: [DONE]\n\n"
    events = _run(Spy, [_data(_chunk(role)) + b"".join(texts) + end])[1]
    assert general == [role, {}]
    assert "".join(e.delta for e in events if type(e).__name__ == "TextDelta") == "ABC"


def test_chat_blocks_opened_on_the_fast_path() -> None:
    role = _data(_chunk({"role": "assistant", "content": "", "refusal": None}))
    end = _data(_chunk({}, finish_reason="stop")) + b"data: [DONE]\n\n"
    citation = {"type": "url_citation", "url_citation": {"url": "u", "title": "t"}}
    streams = [
        # an annotation after the finish still targets the block the fast path opened
        role
        + _data(_chunk({"content": "A"}))
        + _data(_chunk({}, finish_reason="stop"))
        + _data(_chunk({"annotations": [citation]}))
        + b"data: [DONE]\n\n",
        # reasoning first (xAI), then text
        role
        + _data(_chunk({"reasoning_content": "r"}))
        + _data(_chunk({"reasoning_content": "s"}))
        + _data(_chunk({"content": "A"}))
        + end,
        # an open tool call: the text takes the general path
        _data(_chunk(_call("", id="c", type="function", function={"name": "f"})))
        + _data(_chunk({"content": "A"}))
        + end,
        # a second choice opened after the first
        role
        + _data(_chunk({"content": "A"}))
        + _data(_chunk({"role": "assistant", "content": ""}, index=1))
        + _data(_chunk({"content": "B"}, index=1))
        + end,
    ]
    for number, data in enumerate(streams):
        assert_same("openai_chat", data, seed=number)
        assert_same("xai_chat", data, seed=number)


def test_chat_data_after_done_and_truncation() -> None:
    text = _data(_chunk({"content": "B"}))
    assert_same("openai_chat", _chat_stream([text]) + text)
    assert_same("openai_chat", _chat_stream([text] * 3).split(b"data: [DONE]")[0])


def _chat_run_cases() -> dict[str, tuple[list[bytes], bool]]:
    """Streams of chunks the dispatch loop of ChatDecoder takes, broken in various ways."""

    def two(delta0: dict[str, Any], delta1: dict[str, Any], obf: str = "Xq3") -> bytes:
        chunk = _chunk(delta0, obf=obf)
        chunk["choices"].append(
            {"index": 1, "delta": delta1, "logprobs": None, "finish_reason": None}
        )
        return _data(chunk)

    def named(name: str, chunk: dict[str, Any]) -> bytes:
        return _sse(name, chunk)

    text = _chunk({"content": "B"})
    second = {**text, "choices": [{**text["choices"][0], "index": 1}]}
    reasoning = _chunk({"reasoning_content": "r"})
    call0, call1 = _chunk(_call("a")), _chunk(_call("b", 1))
    opening1 = _chunk(_call("", 1, id="call_2", type="function"))
    opening1["choices"][0]["delta"]["tool_calls"][0]["function"]["name"] = "g"
    return {
        "long_run": ([_data(_chunk({"content": str(i)})) for i in range(30)], False),
        "two_choices": (
            [
                two({"role": "assistant", "content": ""}, {"role": "assistant", "content": "x"}),
                _data(text),
                _data(second),
                _data(second),
                _data(text),
            ],
            False,
        ),
        "comments_between": ([_data(text), b": OPENROUTER PROCESSING\n\n", _data(text)], False),
        "named_events": (
            [named("chunk", text), named("chunk", text), _data(text), named("other", text)],
            False,
        ),
        "id_lines": ([b"id: 1\n" + _data(text), b"id: 2\nretry: 9\n" + _data(text)], False),
        "obfuscation_steps": (
            [
                _data(_chunk({"content": "B"}, obf="a")),
                _data(_chunk({"content": "B"}, obf="a")),
                _data(_chunk({"content": "B"}, obf="b")),
                _data(_chunk({"content": "B"}, obf=None)),
                _data(_chunk({"content": "B"}, obf=None)),
                _data(text),
            ],
            False,
        ),
        "reasoning_then_text": (
            [_data(reasoning), _data(reasoning), _data(text), _data(text), _data(reasoning)],
            False,
        ),
        "empty_content": ([_data(text), _data(_chunk({"content": ""})), _data(text)], False),
        "choice_keys_change": (
            [
                _data(text),
                _data({**text, "choices": [{"index": 0, "delta": {"content": "B"}}]}),
                _data(text),
                _data(text),
            ],
            False,
        ),
        "logprobs_set": (
            [_data(text), _data(_chunk({"content": "B"}, logprobs={"content": []})), _data(text)],
            False,
        ),
        "finish_between": (
            [_data(text), _data(_chunk({}, finish_reason="length")), _data(text)],
            False,
        ),
        "usage_between": (
            [_data(text), _data({**text, "choices": [], "usage": {"prompt_tokens": 1}})],
            False,
        ),
        "tools_interleaved": (
            [_data(call0), _data(opening1), _data(call1), _data(call0), _data(call1)],
            True,
        ),
        "tool_empty_args": ([_data(call0), _data(_chunk(_call(""))), _data(call0)], True),
        "tool_unknown_index": ([_data(call0), _data(_chunk(_call("z", 7))), _data(call0)], True),
        "tool_with_type": (
            [_data(call0), _data(_chunk(_call("q", type="function"))), _data(call0)],
            True,
        ),
        "tool_then_text": ([_data(call0), _data(call0), _data(text), _data(call0)], True),
        "malformed_between": (
            [_data(text), _sse(None, None, raw=json.dumps(text)[:-1]), _data(text)],
            False,
        ),
    }


@pytest.mark.parametrize("case", sorted(_chat_run_cases()))
@pytest.mark.parametrize("dialect", ["openai_chat", "xai_chat"])
def test_chat_runs(dialect: str, case: str) -> None:
    middle, tools = _chat_run_cases()[case]
    stream = _chat_stream(middle, tools=tools)
    assert_same(dialect, stream, seed=len(case))
    # Cut before the end (truncated: the Finish names the frame after the last one).
    assert_same(dialect, stream.split(b"data: [DONE]")[0], seed=len(case), splits=1)
    assert_same(dialect, stream.rsplit(b"\n\n", 3)[0] + b"\n\n", seed=1, splits=1)


def test_chat_runs_take_the_chunks() -> None:
    """Chunks after the first of a block are taken by the dispatch loop: _on_event
    sees none of them."""
    fast, _ = _classes("openai_chat")
    calls: list[str] = []

    class Spy(fast):  # type: ignore[valid-type,misc]
        def _on_event(self, event: Any, out: list[Any]) -> None:
            calls.append(event.data)
            super()._on_event(event, out)

    middle = [_data(_chunk({"content": str(i)}, obf=f"o{i % 3}")) for i in range(40)]
    events = _run(Spy, [_chat_stream(middle)])[1]
    # The role chunk, "A" (it opens the text block), the finish_reason chunk and [DONE].
    assert len(calls) == 4
    assert "".join(e.delta for e in events if type(e).__name__ == "TextDelta") == "A" + "".join(
        str(i) for i in range(40)
    )


def _deep(name: str | None) -> bytes:
    return _sse(name, None, raw="[" * 100_000 + "]" * 100_000)


@pytest.mark.parametrize(
    ("dialect", "data"),
    [
        (
            "openai_responses",
            _responses_stream(
                [_sse(_TEXT, _seq(_text_delta(), 5)), _sse(_TEXT, _seq(_text_delta(), 6))],
                tail=False,
            ),
        ),
        ("openai_chat", b"".join(_sse(None, _chunk({"content": c})) for c in ["", "A", "B"])),
    ],
    ids=["responses", "chat"],
)
def test_runs_leave_the_state_of_a_payload_too_deep(dialect: str, data: bytes) -> None:
    """A payload nested past the depth bound is the same error event on both paths,
    from the same state: the decoder then closes with the same events."""
    deep = _deep(_TEXT if dialect == "openai_responses" else None)
    results = []
    for cls in _classes(dialect):
        decoder = cls()
        events = decoder.feed(data)
        nested = decoder.feed(deep)
        assert [type(e) for e in nested] == [ErrorEvent]
        events += nested + decoder.close()
        results.append([msgspec.json.encode(e) for e in events])
    assert results[0] == results[1]


# Messages and Interactions --------------------------------------------------------------


def _messages_stream(middle: list[bytes]) -> bytes:
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "m",
            "content": [],
            "usage": {"input_tokens": 1, "output_tokens": 1},
        },
    }
    return (
        _sse("message_start", start)
        + _sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        )
        + _sse(
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 1,
                "content_block": {"type": "tool_use", "id": "t", "name": "f", "input": {}},
            },
        )
        + b"".join(middle)
        + _sse("content_block_stop", {"type": "content_block_stop", "index": 0})
        + _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn"},
                "usage": {"output_tokens": 3},
            },
        )
        + _sse("message_stop", {"type": "message_stop"})
    )


def _messages_variants() -> dict[str, list[bytes]]:
    def delta(d: dict[str, Any], index: Any = 0, **more: Any) -> bytes:
        return _sse(
            "content_block_delta",
            {"type": "content_block_delta", "index": index, "delta": d, **more},
        )

    text = {"type": "text_delta", "text": "Hi"}
    args = {"type": "input_json_delta", "partial_json": '{"a'}
    return {
        "canonical": [delta(text), delta(args, 1), _sse("ping", {"type": "ping"})],
        "extra_top": [delta(text, extra=1)],
        "extra_delta": [delta({**text, "extra": 1})],
        "index_unknown": [delta(text, 7)],
        "index_str": [delta(text, "0")],
        "wrong_block": [delta(text, 1), delta(args, 0)],
        "text_int": [delta({"type": "text_delta", "text": 1})],
        "unknown_delta": [delta({"type": "brand_new_delta", "x": 1})],
        "name_mismatch": [_sse("ping", {"type": "content_block_delta", "index": 0, "delta": text})],
        "no_name": [_sse(None, {"type": "content_block_delta", "index": 0, "delta": text})],
        "stop_twice": [_sse("content_block_stop", {"type": "content_block_stop", "index": 1})] * 2,
        "ping_extra": [_sse("ping", {"type": "ping", "x": 1})],
        "signature": [delta({"type": "signature_delta", "signature": "sig"})],
        "unknown_event": [_sse("brand_new", {"type": "brand_new"})],
        "spaced": [
            _sse(
                "content_block_delta",
                None,
                raw='{"type": "content_block_delta", "index": 0, '
                '"delta": {"type": "text_delta", "text": "x"}}',
            )
        ],
    }


@pytest.mark.parametrize("case", sorted(_messages_variants()))
@pytest.mark.parametrize("dialect", ["anthropic_messages", "xai_messages"])
def test_messages_variants(dialect: str, case: str) -> None:
    assert_same(dialect, _messages_stream(_messages_variants()[case]), seed=len(case))


def _interactions_stream(middle: list[bytes]) -> bytes:
    def ev(payload: dict[str, Any], n: int) -> bytes:
        return _sse(payload["event_type"], {**payload, "event_id": f"e{n}"})

    return (
        ev(
            {
                "event_type": "interaction.created",
                "interaction": {"id": "v1_x", "status": "in_progress", "model": "g"},
            },
            0,
        )
        + ev({"event_type": "step.start", "index": 0, "step": {"type": "model_output"}}, 1)
        + b"".join(middle)
        + ev({"event_type": "step.stop", "index": 0}, 98)
        + ev(
            {
                "event_type": "interaction.completed",
                "interaction": {"id": "v1_x", "status": "completed"},
            },
            99,
        )
        + _sse("done", None, raw="[DONE]")
    )


def _interactions_variants() -> dict[str, list[bytes]]:
    def delta(d: Any, index: Any = 0, **more: Any) -> bytes:
        return _sse(
            "step.delta",
            {"event_type": "step.delta", "index": index, "delta": d, "event_id": "d", **more},
        )

    text = {"type": "text", "text": "Hi"}
    return {
        "canonical": [delta(text), delta({"type": "thought_signature", "signature": "s"})],
        "extra_top": [delta(text, extra=1)],
        "extra_delta": [delta({**text, "annotations": []})],
        "index_unknown": [delta(text, 5)],
        "text_null": [delta({"type": "text", "text": None})],
        "cursor_int": [
            _sse(
                "step.delta", {"event_type": "step.delta", "index": 0, "delta": text, "event_id": 5}
            )
        ],
        "no_cursor": [_sse("step.delta", {"event_type": "step.delta", "index": 0, "delta": text})],
        "name_mismatch": [
            _sse("step.stop", {"event_type": "step.delta", "index": 0, "delta": text})
        ],
        "unknown_delta": [delta({"type": "brand_new", "x": 1})],
    }


@pytest.mark.parametrize("case", sorted(_interactions_variants()))
def test_interactions_variants(case: str) -> None:
    assert_same(
        "gemini_interactions", _interactions_stream(_interactions_variants()[case]), seed=len(case)
    )


# -- hypothesis: mixes and mutations --------------------------------------------------------

_VALUES = st.sampled_from(
    [None, True, False, 0, 1, -1, 5, 2.5, "", "x", _MSG, _FC, _TEXT, [], {}, [1], {"a": 1}]
)


@st.composite
def _mutated(draw: st.DrawFn, base: dict[str, Any]) -> str:
    """``base`` with keys dropped, retyped, added and reordered, in compact or spaced JSON."""
    items = list(base.items())
    out: list[tuple[str, Any]] = []
    for key, value in items:
        action = draw(st.sampled_from(["keep", "keep", "keep", "drop", "retype"]))
        if action == "keep":
            out.append((key, value))
        elif action == "retype":
            out.append((key, draw(_VALUES)))
    for _ in range(draw(st.integers(0, 2))):
        key = draw(
            st.sampled_from(
                ["zz", "aa", "type", "delta", "choices", "usage", "obfuscation", "index"]
            )
        )
        out.insert(draw(st.integers(0, len(out))), (key, draw(_VALUES)))
    if draw(st.booleans()):
        out = draw(st.permutations(out))
    colon = draw(st.sampled_from([":", ": "]))
    comma = draw(st.sampled_from([",", ", "]))
    pairs = [json.dumps(k) + colon + json.dumps(v, separators=(",", ":")) for k, v in out]
    return "{" + comma.join(pairs) + "}"


def _hypothesis_settings() -> Any:
    return settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_hypothesis_settings()
@given(
    st.lists(
        st.one_of(
            st.sampled_from(sorted(_responses_variants())).map(
                lambda c: b"".join(_responses_variants()[c])
            ),
            _mutated(_seq(_text_delta(), 5)).map(lambda raw: _sse(_TEXT, None, raw=raw)),
            _mutated(_seq(_args_delta(), 5)).map(lambda raw: _sse(_ARGS, None, raw=raw)),
        ),
        max_size=6,
    ),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_responses_any_mix(parts: list[bytes], tail: bool, rng: random.Random) -> None:
    data = _responses_stream(parts, tail=tail)
    assert_same("openai_responses", data, seed=rng.randrange(1000), splits=1)


@st.composite
def _runs(draw: st.DrawFn) -> list[bytes]:
    """Deltas at consecutive sequence numbers, some mutated, some of another kind or out
    of sequence, with comments and other events between them."""
    out: list[bytes] = []
    seq = 5
    kind = draw(st.sampled_from(sorted(_HOT_KINDS)))
    for _ in range(draw(st.integers(1, 14))):
        step = draw(
            st.sampled_from(
                ["next", "next", "next", "next", "mutate", "kind", "comment", "other", "skip"]
            )
        )
        if step == "comment":
            out.append(b": ping\n\n")
            continue
        if step == "other":
            out.append(
                draw(
                    st.sampled_from(
                        [
                            _sse("keepalive", {"type": "keepalive", "sequence_number": seq}),
                            _sse("response.new", {"type": "response.new", "sequence_number": seq}),
                        ]
                    )
                )
            )
            seq += 1
            continue
        if step == "kind":
            kind = draw(st.sampled_from(sorted(_HOT_KINDS)))
        if step == "skip":
            seq += draw(st.sampled_from([-2, -1, 2]))
        name, make = _HOT_KINDS[kind]
        payload = _seq({**make(), "delta": draw(st.text(max_size=4))}, seq)
        if step == "mutate":
            raw = draw(_mutated(payload))
            out.append(_sse(draw(st.sampled_from([name, name, None, _TEXT, _ARGS])), None, raw=raw))
        else:
            out.append(_sse(name, payload))
        seq += 1
    return out


@_hypothesis_settings()
@given(_runs(), st.booleans(), st.randoms(use_true_random=False))
def test_responses_any_run(parts: list[bytes], tail: bool, rng: random.Random) -> None:
    data = _responses_stream(parts, tail=tail)
    assert_same("openai_responses", data, seed=rng.randrange(1000), splits=2)


def _chunk_with_choice(choice: str) -> bytes:
    envelope = json.dumps(_ENVELOPE, separators=(",", ":"))[:-1]
    return _sse(
        None, None, raw=envelope + ',"choices":[' + choice + '],"usage":null,"obfuscation":"Xq3"}'
    )


@_hypothesis_settings()
@given(
    st.lists(
        st.one_of(
            st.sampled_from(sorted(_chat_variants())).map(
                lambda c: b"".join(_chat_variants()[c][0])
            ),
            _mutated(_chunk({"content": "B"})).map(lambda raw: _sse(None, None, raw=raw)),
            _mutated(_chunk({"content": "B"})["choices"][0]).map(_chunk_with_choice),
            _mutated(_chunk(_call("a"))).map(lambda raw: _sse(None, None, raw=raw)),
        ),
        max_size=6,
    ),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_chat_any_mix(parts: list[bytes], tools: bool, rng: random.Random) -> None:
    data = _chat_stream(parts, tools=tools)
    assert_same("openai_chat", data, seed=rng.randrange(1000), splits=1)


@_hypothesis_settings()
@given(
    st.booleans().flatmap(
        lambda tools: st.tuples(
            st.just(tools),
            st.lists(
                st.sampled_from(
                    sorted(c for c, (_, t) in _chat_run_cases().items() if t == tools or not t)
                ),
                max_size=5,
            ),
        )
    ),
    st.randoms(use_true_random=False),
)
def test_chat_any_run(case: tuple[bool, list[str]], rng: random.Random) -> None:
    tools, names = case
    middle = [part for name in names for part in _chat_run_cases()[name][0]]
    data = _chat_stream(middle, tools=tools)
    assert_same("openai_chat", data, seed=rng.randrange(1000), splits=1)


# -- decode() and the accumulator --------------------------------------------------------------


@pytest.mark.parametrize(
    "dialect", ["openai_responses", "openai_chat", "anthropic_messages", "gemini_interactions"]
)
def test_decode_result_is_the_same_on_both_paths(
    dialect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whole bodies larger than decode()'s 64 KiB slices, both paths, one Result."""
    data = _text_stream(dialect, repeat=3000)
    assert len(data) > 3 * 64 * 1024
    fast = decode(data, dialect)
    monkeypatch.setattr(FramedDecoder, "_fast_paths", False)
    general = decode(data, dialect)
    assert msgspec.json.encode(fast) == msgspec.json.encode(general)
    assert fast.text == "B" * 3000 or fast.text.endswith("B" * 3000)


def _text_stream(dialect: str, repeat: int = 3) -> bytes:
    if dialect == "openai_responses":
        deltas = [_sse(_TEXT, _seq(_text_delta("B"), 5 + i)) for i in range(repeat)]
        return _responses_stream(deltas, tail_seq=5 + repeat)
    if dialect == "openai_chat":
        return _chat_stream([_data(_chunk({"content": "B"}))] * repeat)
    if dialect == "anthropic_messages":
        d = _sse(
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": "B"},
            },
        )
        return _messages_stream([d] * repeat)
    d = _sse(
        "step.delta",
        {
            "event_type": "step.delta",
            "index": 0,
            "delta": {"type": "text", "text": "B"},
            "event_id": "d",
        },
    )
    return _interactions_stream([d] * repeat)
