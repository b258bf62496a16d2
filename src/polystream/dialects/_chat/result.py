"""Rebuild the ``ChatCompletion`` a non-streaming call would have returned.

OpenAI API reference, "The chat completion object"::

    {"id", "object": "chat.completion", "created", "model",
     "choices": [{"index", "message": {"role": "assistant", "content", "refusal",
                                       "tool_calls": [{"id", "type": "function",
                                                       "function": {"name", "arguments"}}],
                                       "annotations"?, "reasoning_content"? (xAI)},
                  "logprobs", "finish_reason"}],
     "usage", "system_fingerprint"?, "service_tier"?}

Content comes from the unified blocks (so parallel tool calls keyed by id stay
separate, and arguments are joined once); envelope fields, ``logprobs`` and the native
``usage`` come from the chunks that the Chat encoder writes for the same events, so
the rebuild works for events of any dialect. Rules:

* ``content``/``refusal`` are ``null`` when the choice produced none (as the
  non-streaming endpoint returns them); ``tool_calls`` is present only when there are
  calls; a no-argument call's ``arguments`` is ``"{}"`` (the streamed ``""`` is what a
  non-streaming response never contains).
* ``logprobs.content``/``.refusal`` lists are the concatenation of every chunk's.
* ``usage`` is the last non-empty usage object sent (an empty one never overwrites).
* ``reasoning_content`` is included when the dialect's message has it (xAI) or when
  reasoning text was streamed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from polystream.dialects._chat.quirks import Quirks
from polystream.dialects._chat.usage import convert_usage
from polystream.dialects._chat.wire import ENCODER
from polystream.events import BlockEnd, BlockStart, Event, ReasoningDelta, TextDelta, ToolInputDelta

__all__ = ["rebuild_completion"]

_ENVELOPE_KEEP = ("system_fingerprint", "service_tier")


def rebuild_completion(
    events: Iterable[Event], quirks: Quirks, encoder_type: type[Any]
) -> dict[str, Any]:
    """Rebuild the non-streaming ``ChatCompletion`` from a stream's unified events.

    Args:
        events: The stream's events (any dialect).
        quirks: The Chat dialect whose final object to build.
        encoder_type: The dialect's encoder class (writes the chunks read here).

    Returns:
        The completion as plain JSON values.
    """
    events = list(events)
    encoder = encoder_type(record=True, id_factory=lambda: "chatcmpl-rebuilt")
    recorded: list[dict[str, Any]] = encoder.chunks

    out: dict[str, Any] = {"id": None, "object": "chat.completion", "created": None, "model": None}
    extras: dict[str, Any] = {}
    per_choice: dict[int, dict[str, Any]] = {}
    usage: Any = None
    # The chunks are read as the encoder writes them, and dropped: kept until the end,
    # a long stream's chunks made every collection of the garbage collector longer.
    for event in events:
        encoder.encode(event)
        if recorded:
            usage = _fold_chunks(recorded, quirks, out, extras, per_choice, usage)
            recorded.clear()
    encoder.close()
    usage = _fold_chunks(recorded, quirks, out, extras, per_choice, usage)

    messages = _messages(events)
    choices = []
    for index in sorted(set(per_choice) | set(messages)):
        parts = messages.get(index, {"text": [], "refusal": [], "reasoning": [], "tool_calls": []})
        state = per_choice.get(index, {"finish_reason": None, "logprobs": None, "annotations": []})
        msg: dict[str, Any] = {
            "role": "assistant",
            "content": "".join(parts["text"]) if parts["text"] else None,
            "refusal": "".join(parts["refusal"]) if parts["refusal"] else None,
        }
        if parts["reasoning"] or quirks.rebuild_reasoning:
            msg["reasoning_content"] = "".join(parts["reasoning"]) if parts["reasoning"] else None
        if parts["tool_calls"]:
            msg["tool_calls"] = parts["tool_calls"]
        if state["annotations"]:
            msg["annotations"] = state["annotations"]
        choices.append(
            {
                "index": index,
                "message": msg,
                "logprobs": state["logprobs"],
                "finish_reason": state["finish_reason"],
            }
        )
    out["choices"] = choices
    out["usage"] = usage
    out.update(extras)
    return out


def _fold_chunks(
    chunks: list[dict[str, Any]],
    quirks: Quirks,
    out: dict[str, Any],
    extras: dict[str, Any],
    per_choice: dict[int, dict[str, Any]],
    usage: Any,
) -> Any:
    """Fold chunks the encoder wrote into the completion's envelope, its choices'
    finish reasons, logprobs and annotations; returns the usage so far."""
    for chunk in chunks:
        if "error" in chunk and "choices" not in chunk:
            continue
        for key in ("id", "created", "model"):
            if out[key] is None and chunk.get(key) is not None:
                out[key] = chunk[key]
        for key in _ENVELOPE_KEEP:
            if chunk.get(key) is not None:
                extras[key] = chunk[key]
        raw_usage = chunk.get("usage")
        if isinstance(raw_usage, dict):
            converted = convert_usage(raw_usage, quirks)
            if usage is None or (converted is not None and not converted.is_empty()):
                usage = raw_usage
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, dict) or type(choice.get("index")) is not int:
                continue
            state = per_choice.setdefault(
                choice["index"], {"finish_reason": None, "logprobs": None, "annotations": []}
            )
            if choice.get("finish_reason") is not None:
                state["finish_reason"] = choice["finish_reason"]
            logprobs = choice.get("logprobs")
            if isinstance(logprobs, dict):
                acc = state["logprobs"] = state["logprobs"] or {"content": None, "refusal": None}
                for key in ("content", "refusal"):
                    entries = logprobs.get(key)
                    if isinstance(entries, list):
                        # Extended in place (a new list per chunk was quadratic).
                        if acc[key] is None:
                            acc[key] = list(entries)
                        else:
                            acc[key].extend(entries)
            delta = choice.get("delta")
            if isinstance(delta, dict) and isinstance(delta.get("annotations"), list):
                state["annotations"].extend(delta["annotations"])
    return usage


def _messages(events: list[Event]) -> dict[int, dict[str, list[Any]]]:
    """Fold the blocks of each choice (dialects sit below the accumulator's layer, so
    this small fold is local): fragments are kept in lists and joined once."""
    starts: dict[int, BlockStart] = {}
    parts: dict[int, list[str]] = {}
    ends: dict[int, Any] = {}
    order: list[int] = []
    for event in events:
        kind = type(event)
        if kind is TextDelta or kind is ReasoningDelta or kind is ToolInputDelta:
            assert isinstance(event, TextDelta | ReasoningDelta | ToolInputDelta)
            if event.index in parts:
                parts[event.index].append(event.delta)
        elif kind is BlockStart:
            assert isinstance(event, BlockStart)
            if event.index not in starts:
                starts[event.index] = event
                parts[event.index] = []
                order.append(event.index)
        elif kind is BlockEnd:
            assert isinstance(event, BlockEnd)
            ends[event.index] = event.value
    messages: dict[int, dict[str, list[Any]]] = {}
    for index in order:
        start = starts[index]
        message = messages.setdefault(
            start.candidate, {"text": [], "refusal": [], "reasoning": [], "tool_calls": []}
        )
        text = "".join(parts[index])
        if start.kind in ("text", "refusal", "reasoning"):
            if text:
                message[start.kind].append(text)
        elif start.kind == "tool_call":
            if not parts[index]:
                value = ends.get(index) if ends.get(index) is not None else start.value
                if isinstance(value, str):
                    text = value
                elif value is not None:
                    text = ENCODER.encode(value).decode()
            message["tool_calls"].append(
                {
                    "id": start.call_id or start.id,
                    "type": "function",
                    "function": {"name": start.name or "", "arguments": text or "{}"},
                }
            )
    return messages
