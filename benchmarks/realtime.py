"""An OpenAI Realtime session: polystream against the ``openai`` SDK on the same messages.

``python -m benchmarks.realtime [RESPONSES] [REPEAT]`` builds one GA session's server
messages (:func:`realtime_session`, 60 responses by default: about 6,000 messages) and
times, per peer, reading every message to the session's answer: the output text, the
audio transcript, the audio bytes (each delta's base64 decoded, the bytes joined), each
function call's name and arguments, and each response's usage. Each message is the
bytes of one WebSocket text frame, handed over as a socket library gives them, one at a
time; there is no socket.

* ``polystream``: ``open_session("openai_realtime").feed(message)`` for each message,
  the unified events picked by type (the block kinds from their ``BlockStart``);
* ``sdk``: the openai SDK's own receive path, ``RealtimeConnection.recv()`` over a stub
  connection that hands it the messages: ``parse_event`` turns each into its typed
  ``RealtimeServerEvent`` (``construct_type_unchecked``), picked by ``event.type``;
* ``minimal``: ``json.loads`` of each message and a dispatch on its ``type`` (no
  model, no state): the floor of a Python reader with the standard library;
* ``minimal_msgspec``: the same with ``msgspec.json.decode``.

Every run's answer is checked against the session's before its time counts. It prints
one JSON object: per peer, the median CPU seconds, the messages per second and the
check.
"""

from __future__ import annotations

import base64
import gc
import hashlib
import json
import statistics
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from benchmarks.peers import clock
from benchmarks.workloads import _chunk_text, _compact, _ident, _rng, _tool_arguments

__all__ = ["Answer", "Session", "check", "measure", "peers", "realtime_session"]

_MODEL = "gpt-realtime"
_RATE = 24_000  # PCM16 mono at 24 kHz: 48 bytes a millisecond
_FORMAT = {"type": "audio/pcm", "rate": _RATE}
_ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

Usage = tuple[int | None, int | None, int | None, int | None, int | None, int | None]
"""input, output and total tokens, cached input, audio input, audio output tokens."""


@dataclass
class Answer:
    """What reading a session gives (what every peer must agree on).

    Attributes:
        text: Every ``response.output_text.delta``, joined.
        transcript: Every ``response.output_audio_transcript.delta``, joined.
        audio: Every ``response.output_audio.delta`` decoded, joined.
        tools: Each function call's ``(name, arguments)``, in order.
        usage: Each ``response.done``'s usage (:data:`Usage`), in order.
    """

    text: str
    transcript: str
    audio: bytes
    tools: list[tuple[str, str]]
    usage: list[Usage]


@dataclass
class Session:
    """One session's server messages and their answer.

    Attributes:
        messages: Each server message, the bytes of its text frame.
        answer: What reading them gives (audio bytes included).
        counts: How many messages of each type.
    """

    name: str
    messages: list[bytes]
    answer: Answer
    description: str
    counts: dict[str, int] = field(default_factory=dict)

    @property
    def sha256(self) -> str:
        """Digest of the messages (their lengths and bytes)."""
        digest = hashlib.sha256()
        for message in self.messages:
            digest.update(len(message).to_bytes(8, "big"))
            digest.update(message)
        return digest.hexdigest()


class _Writer:
    """Collects the messages with GA event ids, counting their types."""

    def __init__(self, rng: Any) -> None:
        self.rng = rng
        self.messages: list[bytes] = []
        self.counts: dict[str, int] = {}
        self._prefix = "event_" + _ident(rng, _ALNUM, 8)

    def add(self, kind: str, **fields: Any) -> None:
        event_id = f"{self._prefix}{len(self.messages):05d}"
        self.messages.append(_compact({"type": kind, "event_id": event_id, **fields}).encode())
        self.counts[kind] = self.counts.get(kind, 0) + 1


def _session_object(session_id: str) -> dict[str, Any]:
    vad = {
        "type": "server_vad",
        "threshold": 0.5,
        "prefix_padding_ms": 300,
        "silence_duration_ms": 200,
        "idle_timeout_ms": None,
        "create_response": True,
        "interrupt_response": True,
    }
    return {
        "type": "realtime",
        "object": "realtime.session",
        "id": session_id,
        "model": _MODEL,
        "output_modalities": ["audio"],
        "instructions": "Answer briefly; look rows up with lookup_rows.",
        "tools": [
            {
                "type": "function",
                "name": "lookup_rows",
                "description": "Look rows up in the benchmark table.",
                "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
            }
        ],
        "tool_choice": "auto",
        "max_output_tokens": "inf",
        "tracing": None,
        "truncation": "auto",
        "prompt": None,
        "expires_at": 0,
        "audio": {
            "input": {
                "format": _FORMAT,
                "transcription": None,
                "noise_reduction": None,
                "turn_detection": vad,
            },
            "output": {"format": _FORMAT, "voice": "marin", "speed": 1.0},
        },
        "include": None,
    }


def _response(
    rid: str, conversation: str, audio: bool, status: str, output: list[Any], usage: Any
) -> dict[str, Any]:
    return {
        "object": "realtime.response",
        "id": rid,
        "status": status,
        "status_details": None,
        "output": output,
        "conversation_id": conversation,
        "output_modalities": ["audio" if audio else "text"],
        "max_output_tokens": "inf",
        "audio": {"output": {"format": _FORMAT, "voice": "marin"}} if audio else None,
        "usage": usage,
        "metadata": None,
    }


def _usage(rng: Any, turn: int, audio_ms: int) -> tuple[dict[str, Any], Usage]:
    text_in = 400 + 90 * turn + rng.randrange(40)
    audio_in = 30 + rng.randrange(60)
    cached = (text_in // 64) * 64 if turn else 0
    audio_out = audio_ms // 50  # an audio token is about 50 ms
    text_out = 20 + rng.randrange(30)
    given, made = text_in + audio_in, text_out + audio_out
    raw = {
        "total_tokens": given + made,
        "input_tokens": given,
        "output_tokens": made,
        "input_token_details": {
            "text_tokens": text_in,
            "audio_tokens": audio_in,
            "image_tokens": 0,
            "cached_tokens": cached,
            "cached_tokens_details": {"text_tokens": cached, "audio_tokens": 0, "image_tokens": 0},
        },
        "output_token_details": {"text_tokens": text_out, "audio_tokens": audio_out},
    }
    return raw, (given, made, given + made, cached, audio_in, audio_out)


def realtime_session(
    name: str = "realtime",
    *,
    responses: int = 60,
    audio_deltas: int = 40,
    chunk_ms: int = 100,
    transcript_deltas: int = 12,
    text_deltas: int = 60,
    arg_fragments: int = 20,
    text_every: int = 4,
) -> Session:
    """One OpenAI Realtime GA session, as the server sends it: ``session.created`` and
    ``session.updated`` (PCM16 at 24 kHz both ways), then ``responses`` turns. Each
    turn: server VAD on the user's speech (``speech_started``, ``speech_stopped``,
    ``committed``, the user item), ``response.created``, an assistant message, a
    ``function_call`` item whose arguments come in ``arg_fragments`` deltas, the
    ``.done`` events, ``response.done`` with the usage, ``rate_limits.updated``. The
    message is spoken: ``audio_deltas`` ``response.output_audio.delta`` of ``chunk_ms``
    of PCM each (100 ms: 4,800 bytes, 6,400 base64 characters), with the transcript's
    ``transcript_deltas`` deltas spread among them, each just before the audio it
    speaks (the transcript runs ahead of the audio, as the service sends it); except
    every ``text_every``-th turn, a text-mode one, whose message is ``text_deltas``
    ``response.output_text.delta``.
    """
    rng = _rng(name)
    out = _Writer(rng)
    session_id = "sess_" + _ident(rng, _ALNUM, 21)
    conversation = "conv_" + _ident(rng, _ALNUM, 21)
    out.add("session.created", session=_session_object(session_id))
    out.add("session.updated", session=_session_object(session_id))
    chunk = chunk_ms * _RATE * 2 // 1000
    texts: list[str] = []
    transcripts: list[str] = []
    audio: list[bytes] = []
    tools: list[tuple[str, str]] = []
    usages: list[Usage] = []
    previous: str | None = None
    at_ms = 0
    for turn in range(responses):
        spoken = (turn + 1) % text_every != 0
        user = f"item_{_ident(rng, _ALNUM, 21)}"
        at_ms += 1000 + rng.randrange(2000)
        out.add("input_audio_buffer.speech_started", audio_start_ms=at_ms, item_id=user)
        at_ms += 800 + rng.randrange(3000)
        out.add("input_audio_buffer.speech_stopped", audio_end_ms=at_ms, item_id=user)
        out.add("input_audio_buffer.committed", previous_item_id=previous, item_id=user)
        user_item = {
            "id": user,
            "type": "message",
            "status": "completed",
            "role": "user",
            "content": [{"type": "input_audio", "transcript": None}],
        }
        out.add("conversation.item.added", previous_item_id=previous, item=user_item)
        out.add("conversation.item.done", previous_item_id=previous, item=user_item)
        rid = "resp_" + _ident(rng, _ALNUM, 21)
        out.add(
            "response.created",
            response=_response(rid, conversation, spoken, "in_progress", [], None),
        )
        item = "item_" + _ident(rng, _ALNUM, 21)
        where = {"response_id": rid, "item_id": item, "output_index": 0, "content_index": 0}
        message = {
            "id": item,
            "type": "message",
            "status": "in_progress",
            "role": "assistant",
            "content": [],
        }
        out.add("response.output_item.added", response_id=rid, output_index=0, item=message)
        out.add("conversation.item.added", previous_item_id=user, item=message)
        if spoken:
            out.add(
                "response.content_part.added", **where, part={"type": "audio", "transcript": ""}
            )
            words = _chunk_text(rng, transcript_deltas, 2)
            every = max(1, audio_deltas // max(1, transcript_deltas))
            for k in range(audio_deltas):
                if k % every == 0 and words:
                    word = words.pop(0)
                    transcripts.append(word)
                    out.add("response.output_audio_transcript.delta", **where, delta=word)
                piece = rng.randbytes(chunk)
                audio.append(piece)
                out.add(
                    "response.output_audio.delta", **where, delta=base64.b64encode(piece).decode()
                )
            for word in words:
                transcripts.append(word)
                out.add("response.output_audio_transcript.delta", **where, delta=word)
            said = "".join(transcripts[-transcript_deltas:]) if transcript_deltas else ""
            out.add("response.output_audio.done", **where)
            out.add("response.output_audio_transcript.done", **where, transcript=said)
            part = {"type": "audio", "transcript": said}
            content = [{"type": "output_audio", "transcript": said}]
            audio_ms = audio_deltas * chunk_ms
        else:
            out.add("response.content_part.added", **where, part={"type": "text", "text": ""})
            pieces = _chunk_text(rng, text_deltas, 1)
            for piece_text in pieces:
                out.add("response.output_text.delta", **where, delta=piece_text)
            said = "".join(pieces)
            texts.append(said)
            out.add("response.output_text.done", **where, text=said)
            part = {"type": "text", "text": said}
            content = [{"type": "output_text", "text": said}]
            audio_ms = 0
        out.add("response.content_part.done", **where, part=part)
        done_message = {**message, "status": "completed", "content": content}
        out.add("response.output_item.done", response_id=rid, output_index=0, item=done_message)
        out.add("conversation.item.done", previous_item_id=user, item=done_message)
        call_item = "item_" + _ident(rng, _ALNUM, 21)
        call_id = "call_" + _ident(rng, _ALNUM, 16)
        arguments, fragments = _tool_arguments(rng, arg_fragments)
        tools.append(("lookup_rows", arguments))
        call = {
            "id": call_item,
            "type": "function_call",
            "status": "in_progress",
            "name": "lookup_rows",
            "call_id": call_id,
            "arguments": "",
        }
        call_at = {"response_id": rid, "item_id": call_item, "output_index": 1, "call_id": call_id}
        out.add("response.output_item.added", response_id=rid, output_index=1, item=call)
        out.add("conversation.item.added", previous_item_id=item, item=call)
        for fragment in fragments:
            out.add("response.function_call_arguments.delta", **call_at, delta=fragment)
        out.add(
            "response.function_call_arguments.done",
            **call_at,
            name="lookup_rows",
            arguments=arguments,
        )
        done_call = {**call, "status": "completed", "arguments": arguments}
        out.add("response.output_item.done", response_id=rid, output_index=1, item=done_call)
        out.add("conversation.item.done", previous_item_id=item, item=done_call)
        raw_usage, usage = _usage(rng, turn, audio_ms)
        usages.append(usage)
        response = _response(
            rid, conversation, spoken, "completed", [done_message, done_call], raw_usage
        )
        out.add("response.done", response=response)
        out.add(
            "rate_limits.updated",
            rate_limits=[
                {
                    "name": "requests",
                    "limit": 5000,
                    "remaining": 4999 - turn,
                    "reset_seconds": 0.012,
                },
                {
                    "name": "tokens",
                    "limit": 400000,
                    "remaining": 400000 - 900 * (turn + 1),
                    "reset_seconds": 0.135,
                },
            ],
        )
        previous = call_item
    answer = Answer("".join(texts), "".join(transcripts), b"".join(audio), tools, usages)
    size = sum(len(m) for m in out.messages)
    description = (
        f"OpenAI Realtime GA, {responses} responses, {len(out.messages):,} messages "
        f"({size / 1e6:.1f} MB; {out.counts.get('response.output_audio.delta', 0):,} audio "
        f"deltas of {chunk_ms} ms)"
    )
    return Session(name, out.messages, answer, description, out.counts)


# -- the peers ------------------------------------------------------------------------------

Runner = Callable[[], Answer]


def _polystream(session: Session) -> Runner:
    from polystream.events import BlockStart, DataDelta, Finish, TextDelta, ToolInputDelta
    from polystream.realtime import open_session

    messages = session.messages

    def run() -> Answer:
        reader = open_session("openai_realtime")
        texts: list[str] = []
        transcripts: list[str] = []
        audio: list[bytes] = []
        calls: dict[tuple[int, int], tuple[str, list[str]]] = {}
        kinds: dict[tuple[int, int], str] = {}
        usages: list[Usage] = []
        for message in messages:
            for routed in reader.feed(message):
                event = routed.event
                kind = type(event)
                if kind is DataDelta:
                    audio.append(base64.b64decode(event.delta))  # type: ignore[union-attr]
                elif kind is TextDelta:
                    assert isinstance(event, TextDelta)
                    if kinds[routed.stream, event.index] == "transcript":
                        transcripts.append(event.delta)
                    else:
                        texts.append(event.delta)
                elif kind is ToolInputDelta:
                    assert isinstance(event, ToolInputDelta)
                    calls[routed.stream, event.index][1].append(event.delta)
                elif kind is BlockStart:
                    assert isinstance(event, BlockStart)
                    kinds[routed.stream, event.index] = event.kind
                    if event.kind == "tool_call":
                        calls[routed.stream, event.index] = (event.name or "", [])
                elif kind is Finish:
                    assert isinstance(event, Finish)
                    u = event.usage
                    assert u is not None
                    usages.append(
                        (
                            u.input_tokens,
                            u.output_tokens,
                            u.total_tokens,
                            u.cache_read_tokens,
                            u.audio_input_tokens,
                            u.audio_output_tokens,
                        )
                    )
        reader.close()
        tools = [(name, "".join(parts)) for name, parts in calls.values()]
        return Answer("".join(texts), "".join(transcripts), b"".join(audio), tools, usages)

    return run


class _Frames:
    """A stand-in for the SDK's ``websockets`` connection: ``recv`` hands over the next
    message, as the socket's ``recv(decode=False)`` does (a text frame's bytes)."""

    def __init__(self, messages: list[bytes]) -> None:
        self._next: Iterator[bytes] = iter(messages)

    def recv(self, decode: bool | None = None) -> bytes | str:
        message = next(self._next)
        return message if decode is False else message.decode()


def _sdk(session: Session) -> Runner:
    from openai.resources.realtime.realtime import RealtimeConnection

    messages = session.messages

    def run() -> Answer:
        connection = RealtimeConnection(_Frames(messages))  # type: ignore[arg-type]
        texts: list[str] = []
        transcripts: list[str] = []
        audio: list[bytes] = []
        calls: dict[str, tuple[str, list[str]]] = {}
        usages: list[Usage] = []
        for _ in range(len(messages)):
            event: Any = connection.recv()
            kind = event.type
            if kind == "response.output_audio.delta":
                audio.append(base64.b64decode(event.delta))
            elif kind == "response.output_audio_transcript.delta":
                transcripts.append(event.delta)
            elif kind == "response.output_text.delta":
                texts.append(event.delta)
            elif kind == "response.function_call_arguments.delta":
                calls[event.item_id][1].append(event.delta)
            elif kind == "response.output_item.added":
                if event.item.type == "function_call":
                    calls[event.item.id] = (event.item.name, [])
            elif kind == "response.done":
                u = event.response.usage
                given, made = u.input_token_details, u.output_token_details
                usages.append(
                    (
                        u.input_tokens,
                        u.output_tokens,
                        u.total_tokens,
                        given.cached_tokens,
                        given.audio_tokens,
                        made.audio_tokens,
                    )
                )
        tools = [(name, "".join(parts)) for name, parts in calls.values()]
        return Answer("".join(texts), "".join(transcripts), b"".join(audio), tools, usages)

    return run


def _minimal_with(loads: Callable[[bytes], Any]) -> Callable[[Session], Runner]:
    def prepare(session: Session) -> Runner:
        messages = session.messages

        def run() -> Answer:
            texts: list[str] = []
            transcripts: list[str] = []
            audio: list[bytes] = []
            calls: dict[str, tuple[str, list[str]]] = {}
            usages: list[Usage] = []
            for message in messages:
                event = loads(message)
                kind = event["type"]
                if kind == "response.output_audio.delta":
                    audio.append(base64.b64decode(event["delta"]))
                elif kind == "response.output_audio_transcript.delta":
                    transcripts.append(event["delta"])
                elif kind == "response.output_text.delta":
                    texts.append(event["delta"])
                elif kind == "response.function_call_arguments.delta":
                    calls[event["item_id"]][1].append(event["delta"])
                elif kind == "response.output_item.added":
                    item = event["item"]
                    if item["type"] == "function_call":
                        calls[item["id"]] = (item["name"], [])
                elif kind == "response.done":
                    u = event["response"]["usage"]
                    given, made = u["input_token_details"], u["output_token_details"]
                    usages.append(
                        (
                            u["input_tokens"],
                            u["output_tokens"],
                            u["total_tokens"],
                            given["cached_tokens"],
                            given["audio_tokens"],
                            made["audio_tokens"],
                        )
                    )
            tools = [(name, "".join(parts)) for name, parts in calls.values()]
            return Answer("".join(texts), "".join(transcripts), b"".join(audio), tools, usages)

        return run

    return prepare


def peers() -> dict[str, Callable[[Session], Runner]]:
    """The contestants, by name."""
    import msgspec

    return {
        "polystream": _polystream,
        "sdk": _sdk,
        "minimal": _minimal_with(json.loads),
        "minimal_msgspec": _minimal_with(msgspec.json.decode),
    }


def check(session: Session, got: Answer) -> str | None:
    """None when ``got`` is the session's answer, else what differs."""
    want = session.answer
    if got.text != want.text:
        return f"text differs ({len(got.text)} characters, want {len(want.text)})"
    if got.transcript != want.transcript:
        return f"transcript differs ({len(got.transcript)} characters, want {len(want.transcript)})"
    if len(got.audio) != len(want.audio) or got.audio != want.audio:
        return f"audio differs ({len(got.audio)} bytes, want {len(want.audio)})"
    if got.tools != want.tools:
        return f"tool calls differ ({len(got.tools)} calls, want {len(want.tools)})"
    if got.usage != want.usage:
        return f"usage differs ({got.usage[:1]}..., want {want.usage[:1]}...)"
    return None


def measure(session: Session, repeat: int = 5) -> dict[str, Any]:
    """Per peer: ``{"median": <CPU seconds>, "messages_per_second", "times": [...],
    "check": None or what differs}`` (one warm-up run first, a full collection before
    each timed run)."""
    out: dict[str, Any] = {}
    count = len(session.messages)
    for name, prepare in peers().items():
        run = prepare(session)
        run()  # warm-up: lazy imports, first-call caches
        times: list[float] = []
        problem: str | None = None
        for _ in range(repeat):
            gc.collect()
            start = clock()
            got = run()
            times.append(clock() - start)
            problem = problem or check(session, got)
        median = statistics.median(times)
        out[name] = {
            "median": median,
            "messages_per_second": round(count / median) if median > 0 else None,
            "times": times,
            "check": problem,
        }
    return out


if __name__ == "__main__":
    responses = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    repeat = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    work = realtime_session(responses=responses)
    print(
        json.dumps(
            {
                "workload": work.description,
                "messages": len(work.messages),
                "bytes": sum(len(m) for m in work.messages),
                **measure(work, repeat),
            }
        )
    )
