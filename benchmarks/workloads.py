"""Deterministic workload generator: the exact wire bytes of each dialect's stream.

Every workload is built from a fixed seed, so each run (and each process of a run)
sees byte-identical input. The streams follow the providers' documented wire forms
(``/work/shared/spec/streaming.md`` §1-§2, the skeletons observed live) with realistic
field sizes: OpenAI ids (``resp_`` + 48 hex), ``obfuscation`` padding on every OpenAI
delta, Anthropic ``ping`` events every 100 deltas, ``usageMetadata`` on every Gemini
chunk, Interactions ``event_id`` tokens, Gemini's CRLF framing and pretty-printed JSON
array.

Each :class:`Workload` records what a correct decoder must produce (``text`` and the
tool calls' ``(name, arguments JSON)``), so every peer can be checked on the same
answer before its time is believed.

``python -m benchmarks.workloads OUTDIR`` writes every workload to files.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import string
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["WORKLOADS", "Workload", "build", "build_all"]

_ALNUM = string.ascii_letters + string.digits
_HEX = "0123456789abcdef"

# A small English-like vocabulary. Tokens carry their leading space like BPE tokens
# do; a few need JSON escaping (quotes, backslash, newlines) and a few are non-ASCII
# (curly apostrophe, accents, dashes), as real model output is.
_WORDS = (  # noqa: SIM905 - a word list reads best as text
    "the of and to in is that for it as with was on be by this are or from at an "
    "stream event delta token model response function call argument result value "
    "decoder encoder buffer chunk field usage reason finish block index text data "
    "polystream provider client server request latency memory parse json frame line "
    "because however therefore which where while when before after during between "
    "quickly slowly carefully exactly roughly simply only also still never always "
).split()
_SPECIAL = [
    "’s",  # noqa: RUF001 - the curly apostrophe is the point
    " café",
    " —",
    " naïve",
    ' "quoted"',
    " C:\\path",
    ":",
    ";",
    "(",
    ")",
]


def _rng(name: str) -> random.Random:
    return random.Random(int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big"))


def _token_stream(rng: random.Random, count: int) -> list[str]:
    """``count`` text fragments that read like model output."""
    out: list[str] = []
    sentence = 0
    for _ in range(count):
        r = rng.random()
        if sentence > 12 and r < 0.12:
            out.append("." if rng.random() < 0.8 else "!")
            sentence = 0
        elif r < 0.02:
            out.append("\n\n")
        elif r < 0.05:
            out.append(rng.choice(_SPECIAL))
        elif r < 0.09:
            out.append(",")
        else:
            word = rng.choice(_WORDS)
            if sentence == 0:
                word = word.capitalize()
            out.append(" " + word)
            sentence += 1
    return out


def _chunk_text(rng: random.Random, count: int, tokens_per_chunk: int) -> list[str]:
    tokens = _token_stream(rng, count * tokens_per_chunk)
    return [
        "".join(tokens[i * tokens_per_chunk : (i + 1) * tokens_per_chunk]) for i in range(count)
    ]


def _ident(rng: random.Random, alphabet: str, n: int) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _tool_arguments(rng: random.Random, fragments: int) -> tuple[str, list[str]]:
    """A JSON object (compact, as providers stream it) cut into ``fragments`` pieces.

    The object is sized at about five characters per fragment (a token's worth), and
    the cuts fall anywhere, inside strings and numbers too, as they do on the wire.
    """
    target = max(fragments * 5, 40)
    rows: list[dict[str, Any]] = []
    arguments: dict[str, Any] = {"query": "benchmark rows", "rows": rows}
    size = len(json.dumps(arguments, separators=(",", ":"), ensure_ascii=False))
    i = 0
    while size < target:
        row = {
            "id": i,
            "name": " ".join(rng.choice(_WORDS) for _ in range(3)),
            "score": round(rng.random() * 100, 3),
            "ok": rng.random() < 0.5,
        }
        rows.append(row)
        size += len(json.dumps(row, separators=(",", ":"), ensure_ascii=False)) + 1
        i += 1
    text = json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
    if fragments <= 1:
        return text, [text]
    cuts = sorted(rng.sample(range(1, len(text)), fragments - 1))
    pieces = [text[a:b] for a, b in zip([0, *cuts], [*cuts, len(text)], strict=True)]
    return text, pieces


def _compact(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


@dataclass
class Workload:
    """One benchmark input and its correct answer.

    Attributes:
        name: Workload name (table rows, CLI ``--only``).
        dialect: The polystream dialect name.
        framing: ``sse`` or ``json_array``.
        body: The whole stream, exact wire bytes.
        events: Byte offsets where each wire event ends (for per-event chunking).
        text: The final visible text.
        tools: Each tool call's ``(name, arguments JSON)``, in order.
        deltas: How many text or argument deltas the stream carries.
        family: Which SDK surface reads it (``openai_responses``, ``openai_chat``,
            ``anthropic``, ``gemini``, ``interactions``).
        description: One line for the table.
    """

    name: str
    dialect: str
    framing: str
    body: bytes
    events: list[int]
    text: str
    tools: list[tuple[str, str]]
    deltas: int
    family: str
    description: str
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        """Digest of the body: proves every peer read the same bytes."""
        return hashlib.sha256(self.body).hexdigest()

    def chunks(self) -> list[bytes]:
        """The body cut at event boundaries: one network read per wire event."""
        out: list[bytes] = []
        start = 0
        for end in self.events:
            out.append(self.body[start:end])
            start = end
        if start < len(self.body):
            out.append(self.body[start:])
        return out

    def to_meta(self) -> dict[str, Any]:
        """Everything but the body (stored beside it in the workload folder)."""
        return {
            "name": self.name,
            "dialect": self.dialect,
            "framing": self.framing,
            "events": self.events,
            "text": self.text,
            "tools": self.tools,
            "deltas": self.deltas,
            "family": self.family,
            "description": self.description,
            "sha256": self.sha256,
            "meta": self.meta,
        }

    @classmethod
    def load(cls, folder: Path, name: str) -> Workload:
        """Read a workload written by :func:`write`."""
        meta = json.loads((folder / f"{name}.json").read_text())
        body = (folder / f"{name}.bin").read_bytes()
        work = cls(
            name=meta["name"],
            dialect=meta["dialect"],
            framing=meta["framing"],
            body=body,
            events=meta["events"],
            text=meta["text"],
            tools=[(n, a) for n, a in meta["tools"]],
            deltas=meta["deltas"],
            family=meta["family"],
            description=meta["description"],
            meta=meta["meta"],
        )
        if work.sha256 != meta["sha256"]:
            raise ValueError(f"workload {name}: body does not match its digest")
        return work

    def write(self, folder: Path) -> None:
        """Write ``<name>.bin`` (the wire bytes) and ``<name>.json`` (the answer)."""
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{self.name}.bin").write_bytes(self.body)
        (folder / f"{self.name}.json").write_text(json.dumps(self.to_meta()))


class _SSE:
    """Collects SSE events and their end offsets."""

    def __init__(self, *, crlf: bool = False) -> None:
        self.parts: list[bytes] = []
        self.ends: list[int] = []
        self.size = 0
        self.nl = b"\r\n" if crlf else b"\n"

    def add(self, data: str, event: str | None = None) -> None:
        nl = self.nl
        head = b"event: " + event.encode() + nl if event else b""
        raw = head + b"data: " + data.encode() + nl + nl
        self.parts.append(raw)
        self.size += len(raw)
        self.ends.append(self.size)

    def body(self) -> bytes:
        return b"".join(self.parts)


# -- OpenAI Responses ----------------------------------------------------------------------

_OPENAI_MODEL = "gpt-5.4-nano-2026-03-17"
_CREATED = 1764470000


def _obfuscation(rng: random.Random, delta: str) -> str:
    # OpenAI pads every delta event with random characters so that sizes do not leak
    # the token: short deltas get long padding (observed 2-16 characters).
    return _ident(rng, _ALNUM, max(2, 16 - len(delta)) if rng.random() < 0.9 else 3)


def _response_object(
    rid: str, status: str, output: list[Any], usage: Any, tools: list[Any]
) -> dict[str, Any]:
    return {
        "id": rid,
        "object": "response",
        "created_at": _CREATED,
        "status": status,
        "background": False,
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "max_output_tokens": None,
        "max_tool_calls": None,
        "model": _OPENAI_MODEL,
        "output": output,
        "parallel_tool_calls": True,
        "previous_response_id": None,
        "prompt_cache_key": None,
        "reasoning": {"effort": None, "summary": None},
        "safety_identifier": None,
        "service_tier": "default",
        "store": True,
        "temperature": 1.0,
        "text": {"format": {"type": "text"}, "verbosity": "medium"},
        "tool_choice": "auto",
        "tools": tools,
        "top_logprobs": 0,
        "top_p": 1.0,
        "truncation": "disabled",
        "usage": usage,
        "user": None,
        "metadata": {},
    }


_WEATHER_TOOL = {
    "type": "function",
    "name": "lookup_rows",
    "description": "Look rows up in the benchmark table.",
    "parameters": {
        "type": "object",
        "properties": {"query": {"type": "string"}, "rows": {"type": "array"}},
        "required": ["query", "rows"],
        "additionalProperties": False,
    },
    "strict": True,
}


def responses(name: str, *, text_deltas: int = 0, arg_fragments: int = 0) -> Workload:
    """OpenAI Responses: a message with ``text_deltas`` deltas, or one function call
    whose arguments arrive in ``arg_fragments`` fragments."""
    rng = _rng(name)
    rid = "resp_" + _ident(rng, _HEX, 48)
    sse = _SSE()
    seq = 0

    def emit(event: str, payload: dict[str, Any]) -> None:
        nonlocal seq
        sse.add(_compact({"type": event, "sequence_number": seq, **payload}), event)
        seq += 1

    tools = [_WEATHER_TOOL] if arg_fragments else []
    emit("response.created", {"response": _response_object(rid, "in_progress", [], None, tools)})
    emit(
        "response.in_progress",
        {"response": _response_object(rid, "in_progress", [], None, tools)},
    )
    text = ""
    calls: list[tuple[str, str]] = []
    if text_deltas:
        item_id = "msg_" + _ident(rng, _HEX, 48)
        item = {
            "id": item_id,
            "type": "message",
            "status": "in_progress",
            "content": [],
            "role": "assistant",
        }
        emit("response.output_item.added", {"output_index": 0, "item": item})
        part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
        emit(
            "response.content_part.added",
            {"item_id": item_id, "output_index": 0, "content_index": 0, "part": part},
        )
        pieces = _token_stream(rng, text_deltas)
        for piece in pieces:
            emit(
                "response.output_text.delta",
                {
                    "item_id": item_id,
                    "output_index": 0,
                    "content_index": 0,
                    "delta": piece,
                    "logprobs": [],
                    "obfuscation": _obfuscation(rng, piece),
                },
            )
        text = "".join(pieces)
        emit(
            "response.output_text.done",
            {
                "item_id": item_id,
                "output_index": 0,
                "content_index": 0,
                "text": text,
                "logprobs": [],
            },
        )
        done_part = {"type": "output_text", "annotations": [], "logprobs": [], "text": text}
        emit(
            "response.content_part.done",
            {"item_id": item_id, "output_index": 0, "content_index": 0, "part": done_part},
        )
        final_item: dict[str, Any] = {
            **item,
            "status": "completed",
            "content": [done_part],
        }
        outputs = 1 + text_deltas // 4
    else:
        item_id = "fc_" + _ident(rng, _HEX, 48)
        call_id = "call_" + _ident(rng, _ALNUM, 24)
        item = {
            "id": item_id,
            "type": "function_call",
            "status": "in_progress",
            "arguments": "",
            "call_id": call_id,
            "name": "lookup_rows",
        }
        emit("response.output_item.added", {"output_index": 0, "item": item})
        arguments, pieces = _tool_arguments(rng, arg_fragments)
        for piece in pieces:
            emit(
                "response.function_call_arguments.delta",
                {
                    "item_id": item_id,
                    "output_index": 0,
                    "delta": piece,
                    "obfuscation": _obfuscation(rng, piece),
                },
            )
        emit(
            "response.function_call_arguments.done",
            {"item_id": item_id, "output_index": 0, "arguments": arguments},
        )
        final_item = {**item, "status": "completed", "arguments": arguments}
        calls.append(("lookup_rows", arguments))
        outputs = arg_fragments
    emit("response.output_item.done", {"output_index": 0, "item": final_item})
    usage = {
        "input_tokens": 812,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": outputs,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": 812 + outputs,
    }
    emit(
        "response.completed",
        {"response": _response_object(rid, "completed", [final_item], usage, tools)},
    )
    kind = (
        f"{text_deltas:,} text deltas"
        if text_deltas
        else f"function call, {arg_fragments:,} fragments"
    )
    return Workload(
        name=name,
        dialect="openai_responses",
        framing="sse",
        body=sse.body(),
        events=sse.ends,
        text=text,
        tools=calls,
        deltas=text_deltas or arg_fragments,
        family="openai_responses",
        description=f"OpenAI Responses, {kind}",
    )


# -- OpenAI Chat Completions ---------------------------------------------------------------


def chat(name: str, *, text_chunks: int = 0, arg_fragments: int = 0) -> Workload:
    """OpenAI Chat Completions: ``text_chunks`` content chunks, or two parallel tool
    calls whose arguments arrive in ``arg_fragments`` fragments in total."""
    rng = _rng(name)
    cid = "chatcmpl-" + _ident(rng, _ALNUM, 29)
    sse = _SSE()

    def chunk(choices: list[Any], usage: Any = None) -> None:
        payload = {
            "id": cid,
            "object": "chat.completion.chunk",
            "created": _CREATED,
            "model": _OPENAI_MODEL,
            "service_tier": "default",
            "system_fingerprint": None,
            "choices": choices,
            "usage": usage,
        }
        pad_from = choices[0]["delta"] if choices else {}
        payload["obfuscation"] = _obfuscation(rng, str(pad_from.get("content") or ""))
        sse.add(_compact(payload))

    def choice(delta: dict[str, Any], finish: str | None = None) -> list[Any]:
        return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]

    text = ""
    calls: list[tuple[str, str]] = []
    if text_chunks:
        chunk(choice({"role": "assistant", "content": "", "refusal": None}))
        pieces = _token_stream(rng, text_chunks)
        for piece in pieces:
            chunk(choice({"content": piece}))
        text = "".join(pieces)
        chunk(choice({}, "stop"))
        outputs = text_chunks
    else:
        halves = [arg_fragments // 2, arg_fragments - arg_fragments // 2]
        first = True
        for index, count in enumerate(halves):
            call_id = "call_" + _ident(rng, _ALNUM, 24)
            arguments, pieces = _tool_arguments(rng, count)
            opener: dict[str, Any] = {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call_id,
                        "type": "function",
                        "function": {"name": "lookup_rows", "arguments": ""},
                    }
                ]
            }
            if first:
                opener = {"role": "assistant", "content": None, **opener, "refusal": None}
                first = False
            chunk(choice(opener))
            for piece in pieces:
                chunk(choice({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
            calls.append(("lookup_rows", arguments))
        chunk(choice({}, "tool_calls"))
        outputs = arg_fragments
    chunk(
        [],
        {
            "prompt_tokens": 812,
            "completion_tokens": outputs,
            "total_tokens": 812 + outputs,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
    )
    sse.add("[DONE]")
    kind = (
        f"{text_chunks:,} text chunks"
        if text_chunks
        else f"2 tool calls, {arg_fragments:,} fragments"
    )
    return Workload(
        name=name,
        dialect="openai_chat",
        framing="sse",
        body=sse.body(),
        events=sse.ends,
        text=text,
        tools=calls,
        deltas=text_chunks or arg_fragments,
        family="openai_chat",
        description=f"Chat Completions, {kind}",
    )


# -- Anthropic Messages --------------------------------------------------------------------

_CLAUDE = "claude-haiku-4-5-20251001"


def anthropic(name: str, *, text_deltas: int = 0, arg_fragments: int = 0) -> Workload:
    """Anthropic Messages: ``text_deltas`` text deltas with a ``ping`` every 100, or a
    short text block then a ``tool_use`` block whose ``input_json_delta`` arrives in
    ``arg_fragments`` fragments (the first one empty, as the API sends it)."""
    rng = _rng(name)
    mid = "msg_01" + _ident(rng, _ALNUM, 22)
    sse = _SSE()

    def emit(event: str, payload: dict[str, Any]) -> None:
        sse.add(_compact({"type": event, **payload}), event)

    emit(
        "message_start",
        {
            "message": {
                "model": _CLAUDE,
                "id": mid,
                "type": "message",
                "role": "assistant",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": 812,
                    "cache_creation_input_tokens": 0,
                    "cache_read_input_tokens": 0,
                    "cache_creation": {
                        "ephemeral_5m_input_tokens": 0,
                        "ephemeral_1h_input_tokens": 0,
                    },
                    "output_tokens": 1,
                    "service_tier": "standard",
                },
            }
        },
    )
    calls: list[tuple[str, str]] = []
    sent = 0

    def ping_maybe() -> None:
        nonlocal sent
        sent += 1
        if sent % 100 == 0:
            sse.add('{"type": "ping"}', "ping")

    emit("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
    sse.add('{"type": "ping"}', "ping")
    pieces = _token_stream(rng, text_deltas if text_deltas else 8)
    for piece in pieces:
        emit("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": piece}})
        ping_maybe()
    emit("content_block_stop", {"index": 0})
    text = "".join(pieces)
    stop = "end_turn"
    if arg_fragments:
        tid = "toolu_01" + _ident(rng, _ALNUM, 22)
        emit(
            "content_block_start",
            {
                "index": 1,
                "content_block": {
                    "type": "tool_use",
                    "id": tid,
                    "name": "lookup_rows",
                    "input": {},
                },
            },
        )
        arguments, frags = _tool_arguments(rng, arg_fragments - 1)
        for piece in ["", *frags]:
            emit(
                "content_block_delta",
                {"index": 1, "delta": {"type": "input_json_delta", "partial_json": piece}},
            )
            ping_maybe()
        emit("content_block_stop", {"index": 1})
        calls.append(("lookup_rows", arguments))
        stop = "tool_use"
    outputs = len(pieces) + arg_fragments
    emit(
        "message_delta",
        {
            "delta": {"stop_reason": stop, "stop_sequence": None},
            "usage": {
                "input_tokens": 812,
                "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0,
                "output_tokens": outputs,
            },
        },
    )
    emit("message_stop", {})
    kind = (
        f"tool_use, {arg_fragments:,} input_json_delta fragments"
        if arg_fragments
        else f"{text_deltas:,} text deltas, ping every 100"
    )
    return Workload(
        name=name,
        dialect="anthropic_messages",
        framing="sse",
        body=sse.body(),
        events=sse.ends,
        text=text,
        tools=calls,
        deltas=arg_fragments or text_deltas,
        family="anthropic",
        description=f"Anthropic Messages, {kind}",
    )


# -- Gemini generateContent ----------------------------------------------------------------

_GEMINI = "gemini-3.5-flash-lite"


def _gemini_chunks(rng: random.Random, chunks: int) -> tuple[list[dict[str, Any]], str]:
    rid = _ident(rng, _ALNUM, 22)
    texts = _chunk_text(rng, chunks, 4)
    out: list[dict[str, Any]] = []
    tokens = 0
    for i, piece in enumerate(texts):
        tokens += 4
        last = i == len(texts) - 1
        parts: list[dict[str, Any]] = [{"text": piece}]
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if last:
            # Gemini 3: the last chunk carries an empty-text part holding the
            # thoughtSignature (spec §2), and the finishReason.
            signature = base64.b64encode(rng.randbytes(190)).decode()
            parts.append({"text": "", "thoughtSignature": signature})
            candidate["finishReason"] = "STOP"
        out.append(
            {
                "candidates": [candidate],
                "usageMetadata": {
                    "promptTokenCount": 812,
                    "candidatesTokenCount": tokens,
                    "totalTokenCount": 812 + tokens + 23,
                    "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 812}],
                    "thoughtsTokenCount": 23,
                },
                "modelVersion": _GEMINI,
                "responseId": rid,
            }
        )
    return out, "".join(texts)


def gemini_sse(name: str, *, chunks: int) -> Workload:
    """Gemini ``streamGenerateContent?alt=sse``: ``chunks`` chunks, CRLF framing,
    ``usageMetadata`` on each."""
    rng = _rng("gemini")  # same content as the JSON-array workload
    elements, text = _gemini_chunks(rng, chunks)
    sse = _SSE(crlf=True)
    for element in elements:
        sse.add(json.dumps(element, separators=(",", ": "), ensure_ascii=False))
    return Workload(
        name=name,
        dialect="gemini_generate",
        framing="sse",
        body=sse.body(),
        events=sse.ends,
        text=text,
        tools=[],
        deltas=chunks,
        family="gemini",
        description=f"Gemini generateContent SSE, {chunks:,} chunks",
    )


def gemini_array(name: str, *, chunks: int) -> Workload:
    """Gemini ``streamGenerateContent`` default framing: a pretty-printed JSON array
    streamed element by element (CRLF line ends, a comma line between elements)."""
    rng = _rng("gemini")
    elements, text = _gemini_chunks(rng, chunks)
    parts: list[bytes] = []
    ends: list[int] = []
    size = 0
    for i, element in enumerate(elements):
        pretty = json.dumps(element, indent=2, ensure_ascii=False).replace("\n", "\r\n")
        raw = (b"[" if i == 0 else b"\r\n,\r\n") + pretty.encode()
        parts.append(raw)
        size += len(raw)
        ends.append(size)
    parts.append(b"\r\n]")
    ends.append(size + 3)
    return Workload(
        name=name,
        dialect="gemini_generate",
        framing="json_array",
        body=b"".join(parts),
        events=ends,
        text=text,
        tools=[],
        deltas=chunks,
        family="gemini_array",
        description=f"Gemini generateContent JSON array, {chunks:,} chunks",
    )


# -- Gemini Interactions -------------------------------------------------------------------


def interactions(name: str, *, step_deltas: int) -> Workload:
    """Gemini Interactions: one ``model_output`` step with ``step_deltas`` text deltas,
    each event with its ``event_id`` resume token."""
    rng = _rng(name)
    iid = "v1_" + _ident(rng, _ALNUM, 40)
    sse = _SSE()
    counter = 0

    def emit(event: str, payload: dict[str, Any]) -> None:
        nonlocal counter
        counter += 1
        event_id = _ident(rng, _ALNUM, 42) + str(counter)
        sse.add(_compact({"event_type": event, **payload, "event_id": event_id}), event)

    interaction = {
        "id": iid,
        "status": "in_progress",
        "model": _GEMINI,
        "object": "interaction",
        "created": "2026-11-30T03:00:00Z",
        "updated": "2026-11-30T03:00:00Z",
    }
    emit("interaction.created", {"interaction": interaction})
    emit("interaction.status_update", {"interaction_id": iid, "status": "in_progress"})
    emit("step.start", {"index": 0, "step": {"type": "model_output"}})
    pieces = _token_stream(rng, step_deltas)
    for piece in pieces:
        emit("step.delta", {"index": 0, "delta": {"type": "text", "text": piece}})
    emit("step.stop", {"index": 0})
    usage = {
        "total_input_tokens": 812,
        "total_output_tokens": step_deltas,
        "total_thought_tokens": 0,
        "total_tokens": 812 + step_deltas,
        "input_tokens_by_modality": [{"modality": "text", "tokens": 812}],
    }
    emit(
        "interaction.completed",
        {"interaction": {**interaction, "status": "completed", "usage": usage}},
    )
    sse.add("[DONE]", "done")
    return Workload(
        name=name,
        dialect="gemini_interactions",
        framing="sse",
        body=sse.body(),
        events=sse.ends,
        text="".join(pieces),
        tools=[],
        deltas=step_deltas,
        family="interactions",
        description=f"Gemini Interactions, {step_deltas:,} step deltas",
    )


# -- OpenAI speech -------------------------------------------------------------------------


def speech_sse(name: str, *, deltas: int, size: int = 2400) -> Workload:
    """OpenAI ``/v1/audio/speech`` with ``stream_format: "sse"``: ``deltas``
    ``speech.audio.delta`` events of ``size`` bytes of 24 kHz 16-bit PCM each (50 ms; the
    base64 of each encoded on its own), then ``speech.audio.done`` with the usage. No
    text: the answer is the audio, whose digest is ``meta["audio_sha256"]``. Not part of
    the text suite (:data:`WORKLOADS`): :mod:`benchmarks.speech` measures it."""
    rng = _rng(name)
    sse = _SSE()
    audio: list[bytes] = []
    for _ in range(deltas):
        piece = rng.randbytes(size)
        audio.append(piece)
        sse.add(_compact({"type": "speech.audio.delta", "audio": base64.b64encode(piece).decode()}))
    usage = {"input_tokens": 37, "output_tokens": deltas * 3, "total_tokens": 37 + deltas * 3}
    sse.add(_compact({"type": "speech.audio.done", "usage": usage}))
    return Workload(
        name=name,
        dialect="openai_speech",
        framing="sse",
        body=sse.body(),
        events=sse.ends,
        text="",
        tools=[],
        deltas=deltas,
        family="openai_speech",
        description=f"OpenAI speech SSE, {deltas:,} audio deltas of {size:,} bytes",
        meta={"audio_sha256": hashlib.sha256(b"".join(audio)).hexdigest(), "usage": usage},
    )


# -- the suite -----------------------------------------------------------------------------


def _specs(scale: float) -> dict[str, Callable[[], Workload]]:
    def n(count: int) -> int:
        return max(4, round(count * scale))

    return {
        "responses_text": lambda: responses("responses_text", text_deltas=n(20_000)),
        "responses_tool": lambda: responses("responses_tool", arg_fragments=n(5_000)),
        "chat_text": lambda: chat("chat_text", text_chunks=n(20_000)),
        "chat_tool": lambda: chat("chat_tool", arg_fragments=n(5_000)),
        "anthropic_text": lambda: anthropic("anthropic_text", text_deltas=n(20_000)),
        "anthropic_tool_1k": lambda: anthropic("anthropic_tool_1k", arg_fragments=n(1_000)),
        "anthropic_tool_5k": lambda: anthropic("anthropic_tool_5k", arg_fragments=n(5_000)),
        "anthropic_tool_20k": lambda: anthropic("anthropic_tool_20k", arg_fragments=n(20_000)),
        "gemini_sse": lambda: gemini_sse("gemini_sse", chunks=n(5_000)),
        "gemini_array": lambda: gemini_array("gemini_array", chunks=n(5_000)),
        "interactions_text": lambda: interactions("interactions_text", step_deltas=n(5_000)),
    }


WORKLOADS: tuple[str, ...] = tuple(_specs(1.0))
"""Every workload name, in table order."""


def build(name: str, scale: float = 1.0) -> Workload:
    """Build one workload (``scale`` shrinks every count, for the quick mode)."""
    return _specs(scale)[name]()


def build_all(scale: float = 1.0, only: list[str] | None = None) -> list[Workload]:
    """Build every workload (or those named in ``only``)."""
    specs = _specs(scale)
    return [make() for name, make in specs.items() if not only or name in only]


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "benchmark-workloads")
    for work in build_all():
        work.write(target)
        print(f"{work.name:20} {len(work.body):>10,} bytes  {work.description}")
