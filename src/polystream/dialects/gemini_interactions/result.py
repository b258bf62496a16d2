"""Rebuild the final ``Interaction`` object from unified events, as
``GET /v1beta/interactions/{id}`` (or a non-streaming create) returns it.

The streamed ``interaction.completed`` carries the final interaction *without* its steps
("empty outputs to reduce the payload size": SDK docs of ``InteractionCompletedEvent``):
the steps are rebuilt from the step events. When the final interaction does carry its
steps (or legacy ``outputs``), they are used as sent, so the rebuilt object equals it.

Rebuilt steps (current schema; legacy ``outputs`` use the content shapes of the old SDK):

* ``thought``: ``{"type": "thought", "signature", "summary": [{"type": "text", "text"}]}``
* ``model_output``: ``{"type": "model_output", "content": [...]}``: one ``text`` item (with
  ``annotations``) and one item per media delta type (``image``, ``audio``...)
* ``function_call``: ``{"type", "id", "name", "arguments": <parsed JSON>}``
* server tool calls / results: the start step's fields updated by each whole-object delta
  (``arguments`` / ``result``, ``signature``, ``is_error``...).

Works on any dialect's events: those of another dialect are first encoded to this dialect
and decoded back, so the object is exactly what the encoded stream describes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import msgspec

from polystream.dialects._carrier import origin, wrap
from polystream.events import (
    BlockStart,
    Citation,
    DataDelta,
    Event,
    Finish,
    ReasoningDelta,
    SignatureDelta,
    StatusUpdate,
    StreamStart,
    TextDelta,
    ToolInputDelta,
    Usage,
    UsageUpdate,
)

from .decode import DIALECT, Decoder, data_delta_type
from .encode import Encoder
from .finish_reason import native_status
from .usage import usage_to_native
from .wire import NAMED_STEP_TYPES, decode_any, main_field, step_type_of

__all__ = ["build_steps", "rebuild"]

_FINAL: Final = frozenset({"interaction.completed", "interaction.complete"})


class _StepBuild:
    __slots__ = ("args", "data", "kind", "media", "reasoning", "signature", "step", "text", "whole")

    def __init__(self, step: dict[str, Any], kind: str) -> None:
        self.step = step
        self.kind = kind
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.signature: list[str] = []
        self.args: list[str] = []
        self.whole = False  # a whole-object delta set the main field
        self.media: dict[str, list[str]] = {}  # delta type -> base64 parts
        self.data: dict[str, dict[str, Any]] = {}  # delta type -> other media fields


def _is_derived(event: Event) -> bool:
    return event.extra is not None and bool(event.extra.get("derived"))


def _step_of(event: BlockStart, legacy: bool) -> dict[str, Any]:
    extra = event.extra or {}
    stype = extra.get("type") or step_type_of(event.kind, event.name, legacy)
    borrowed = extra.get("from_delta") or ()
    step: dict[str, Any] = {"type": stype}
    if event.id is not None and "id" not in borrowed:
        step["id"] = event.id
    if event.call_id is not None and "call_id" not in borrowed:
        step["call_id"] = event.call_id
    if event.name is not None and stype in NAMED_STEP_TYPES and "name" not in borrowed:
        step["name"] = event.name
    if event.value is not None:
        step[main_field(stype)] = event.value
    step.update(extra.get("step") or {})
    return step


def build_steps(events: Iterable[Event], *, legacy: bool | None = None) -> list[dict[str, Any]]:
    """The interaction's steps (or legacy ``outputs``) rebuilt from the step events alone.

    Args:
        events: The unified events of one stream.
        legacy: Build legacy ``outputs`` content; by default the stream's schema.
    """
    builds: dict[int, _StepBuild] = {}
    order: list[_StepBuild] = []
    for event in events:
        if isinstance(event, StreamStart):
            if legacy is None:
                legacy = (event.extra or {}).get("schema") == "legacy"
        elif isinstance(event, BlockStart):
            build = _StepBuild(_step_of(event, bool(legacy)), event.kind)
            builds[event.index] = build
            order.append(build)
        elif _is_derived(event):
            continue
        elif isinstance(event, TextDelta | ReasoningDelta | SignatureDelta):
            target = builds.get(event.index)
            if target is None:
                continue
            if isinstance(event, TextDelta):
                target.text.append(event.delta)
            elif isinstance(event, ReasoningDelta):
                target.reasoning.append(event.delta)
            else:
                # Another origin's state as the stream holds it: in the carrier.
                source = origin(event.extra, DIALECT)
                delta = event.delta if source == DIALECT else wrap(str(source), event.delta)
                target.signature.append(delta)
        elif isinstance(event, ToolInputDelta):
            _tool_input(builds.get(event.index), event)
        elif isinstance(event, DataDelta):
            _data(builds.get(event.index), event)
        elif isinstance(event, Citation) and event.index is not None and event.index in builds:
            annotations = [event.citation, *((event.extra or {}).get("more") or ())]
            bucket = builds[event.index].data.setdefault("annotations", {})
            bucket.setdefault("list", []).extend(annotations)
    return [_finish_step(build, bool(legacy)) for build in order]


def _tool_input(build: _StepBuild | None, event: ToolInputDelta) -> None:
    if build is None:
        return
    extra = event.extra or {}
    dtype = extra.get("dt")
    if dtype is None:
        build.args.append(event.delta)
        return
    if not extra.get("absent"):
        build.step[main_field(dtype)] = decode_any(event.delta)
        build.whole = True
    for key, value in (extra.get("d") or {}).items():
        build.step[key] = value


def _data(build: _StepBuild | None, event: DataDelta) -> None:
    if build is None:
        return
    extra = event.extra or {}
    dtype = extra.get("dt") or data_delta_type(build.kind)
    if event.replace:
        build.media[dtype] = [event.delta]
    else:
        build.media.setdefault(dtype, []).append(event.delta)
    fields = build.data.setdefault(dtype, {})
    if event.mime_type is not None:
        fields["mime_type"] = event.mime_type
    fields.update(extra.get("d") or {})


def _finish_step(build: _StepBuild, legacy: bool) -> dict[str, Any]:
    step = build.step
    stype = step.get("type")
    if build.signature:
        previous = step.get("signature")
        step["signature"] = (previous if isinstance(previous, str) else "") + "".join(
            build.signature
        )
    if build.reasoning:
        summary = step.get("summary")
        text = "".join(build.reasoning)
        if isinstance(summary, list) and summary and isinstance(summary[-1], dict):
            last = dict(summary[-1])
            last["text"] = str(last.get("text", "")) + text
            step["summary"] = [*summary[:-1], last]
        else:
            step["summary"] = [{"type": "text", "text": text}]
    if build.args and not build.whole:
        text = "".join(build.args)
        try:
            step[main_field(str(stype))] = decode_any(text) if text.strip() else {}
        except msgspec.DecodeError:
            step[main_field(str(stype))] = text
    annotations = build.data.pop("annotations", {}).get("list")
    if legacy:
        if build.text:
            step["text"] = "".join(build.text)
        if annotations:
            step["annotations"] = annotations
        for dtype, parts in build.media.items():
            step["data"] = "".join(parts)
            step.update(build.data.get(dtype, {}))
        return step
    if build.text or build.media or annotations:
        given = step.get("content")
        content: list[dict[str, Any]] = list(given) if isinstance(given, list) else []
        if build.text or annotations:
            item: dict[str, Any] = {"type": "text", "text": "".join(build.text)}
            if content and isinstance(content[-1], dict) and content[-1].get("type") == "text":
                # The step began with some text already: the deltas continue it.
                item = dict(content.pop())
                item["text"] = str(item.get("text", "")) + "".join(build.text)
                if annotations:
                    item["annotations"] = [*(item.get("annotations") or []), *annotations]
            elif annotations:
                item["annotations"] = annotations
            content.append(item)
        for dtype, parts in build.media.items():
            media: dict[str, Any] = {"type": dtype, "data": "".join(parts)}
            media.update(build.data.get(dtype, {}))
            content.append(media)
        step["content"] = content
    return step


def rebuild(events: Iterable[Event]) -> dict[str, Any]:
    """The final ``Interaction`` object of a stream (see the module docstring).

    Args:
        events: The unified events of one stream (any dialect).

    Returns:
        The interaction as the non-streaming endpoint returns it: ``id``, ``status``,
        ``model``, ``steps`` (legacy: ``outputs``), ``usage`` and the other fields the
        stream reported.
    """
    events = list(events)
    first = next((e for e in events if isinstance(e, StreamStart)), None)
    if first is not None and first.dialect != DIALECT:
        # Another dialect's events: the object is the one their Interactions encoding
        # describes, so map them exactly as the encoder does.
        decoder = Decoder()
        events = decoder.feed(Encoder().encode_all(events)) + decoder.close()
    interaction: dict[str, Any] = {}
    final: dict[str, Any] | None = None
    legacy = False
    status: str | None = None
    usage: Usage | None = None
    finish: Finish | None = None
    native = False
    for event in events:
        if isinstance(event, StreamStart):
            extra = event.extra or {}
            native = event.dialect == DIALECT
            legacy = native and extra.get("schema") == "legacy"
            if event.id is not None:
                interaction["id"] = event.id
            if native:
                interaction.update(extra.get("interaction") or {})
            if event.model is not None:
                interaction["model"] = event.model
        elif isinstance(event, StatusUpdate):
            extra = event.extra or {}
            status = event.status
            event_name = extra.get("event")
            if type(event_name) is str and event_name in _FINAL:
                final = dict(extra.get("interaction") or {})
                if not extra.get("no_status"):
                    final["status"] = event.status
        elif isinstance(event, UsageUpdate):
            usage = event.usage if usage is None else usage.merged(event.usage)
        elif isinstance(event, Finish):
            finish = event
    key = "outputs" if legacy else "steps"
    if final is not None:
        interaction.update(final)
    else:
        if finish is not None and finish.status != "truncated":
            interaction["status"] = native_status(finish.status, finish.reason)
        elif status is not None:
            interaction["status"] = status
        if usage is not None or (finish is not None and finish.usage is not None):
            chosen = finish.usage if finish is not None and finish.usage is not None else usage
            assert chosen is not None
            interaction["usage"] = (
                chosen.raw if native and chosen.raw else usage_to_native(chosen)[0]
            )
    if not interaction.get(key):
        interaction[key] = build_steps(events, legacy=legacy)
    return interaction
