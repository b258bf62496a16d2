"""The Gemini Interactions request codec (``/v1beta/interactions``): a native body <->
the unified :class:`~polystream.request_model.Request`.

Opaque reasoning state in the history travels as ``thought`` content with its
``signature``.
"""

from __future__ import annotations

import json
from typing import Any, Final

from polystream.dialects._request_common import (
    FamilyCodec,
    _append,
    _function_tools,
    _list,
    _model,
    _obj,
    _opt_float,
    _opt_int,
    _parse_function_tools,
    _put_settings,
    _result_text,
    _stop,
    _str,
    _text_of,
)
from polystream.dialects._spec import RequestCodec
from polystream.errors import RequestError
from polystream.request_model import (
    ImagePart,
    Message,
    NativeRequest,
    Part,
    ReasoningConfig,
    ReasoningPart,
    Request,
    TextPart,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["INTERACTIONS", "InteractionsCodec"]

_SETTINGS: Final = {
    "max_tokens": "max_output_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "stop": "stop_sequences",
}


def _parse_interactions(body: dict[str, Any]) -> Request:
    raw = body.get("input")
    messages: list[Message] = []
    if isinstance(raw, str):
        messages.append(Message(role="user", content=[TextPart(text=raw)]))
    else:
        for i, turn in enumerate(_list(raw, "input")):
            turn = _obj(turn, f"input[{i}]")
            if "role" in turn:
                role = "assistant" if turn["role"] == "model" else "user"
                content = turn.get("content", [])
                parts: list[Part] = (
                    [TextPart(text=content)]
                    if isinstance(content, str)
                    else [
                        _interaction_part(c, f"input[{i}].content[{j}]")
                        for j, c in enumerate(_list(content, f"input[{i}].content"))
                    ]
                )
                if role == "user" and parts and all(isinstance(p, ToolResultPart) for p in parts):
                    messages.append(Message(role="tool", content=parts))
                else:
                    messages.append(Message(role=role, content=parts))  # type: ignore[arg-type]
            else:
                part = _interaction_part(turn, f"input[{i}]")
                role = (
                    "tool"
                    if isinstance(part, ToolResultPart)
                    else "assistant"
                    if isinstance(part, ToolCallPart | ReasoningPart)
                    else "user"
                )
                _append(messages, role, part)
    config = _obj(body.get("generation_config") or {}, "generation_config")
    tools = _parse_function_tools(body)
    level = config.get("thinking_level")
    system = body.get("system_instruction")
    return Request(
        model=_model(body),
        messages=messages,
        system=system if isinstance(system, str) else None,
        tools=tools,
        max_tokens=_opt_int(config, "max_output_tokens"),
        temperature=_opt_float(config, "temperature"),
        top_p=_opt_float(config, "top_p"),
        stop=_stop(config.get("stop_sequences")),
        reasoning=ReasoningConfig(
            effort=level, summary=True if config.get("thinking_summaries") else None
        )
        if level or config.get("thinking_summaries")
        else None,
        stream=bool(body.get("stream", False)),
        background=bool(body.get("background", False)),
    )


def _interaction_part(content: Any, param: str) -> Part:
    content = _obj(content, param)
    kind = content.get("type")
    if kind == "text":
        return TextPart(text=_str(content.get("text"), f"{param}.text"))
    if kind == "image":
        return ImagePart(
            data=content.get("data"), url=content.get("uri"), mime_type=content.get("mime_type")
        )
    if kind == "thought":
        text = _text_of(content.get("summary") or [], f"{param}.summary")
        return ReasoningPart(text=text, signature=content.get("signature"))
    if kind == "function_call":
        return ToolCallPart(
            id=content.get("id"),
            name=_str(content.get("name"), f"{param}.name"),
            arguments=content.get("arguments") or {},
        )
    if kind == "function_result":
        result = content.get("result")
        return ToolResultPart(
            call_id=content.get("call_id"),
            name=content.get("name"),
            content=result if isinstance(result, str) else json.dumps(result),
            is_error=bool(content.get("is_error", False)),
        )
    raise RequestError(f"unsupported content type {kind!r}", param=f"{param}.type")


def _build_interactions(request: Request) -> NativeRequest:
    turns: list[dict[str, Any]] = []
    for message in request.messages:
        content: list[dict[str, Any]] = []
        for part in message.content:
            if isinstance(part, TextPart):
                content.append({"type": "text", "text": part.text})
            elif isinstance(part, ImagePart):
                image: dict[str, Any] = {
                    "type": "image",
                    "mime_type": part.mime_type or "image/png",
                }
                image.update({"data": part.data} if part.data is not None else {"uri": part.url})
                content.append(image)
            elif isinstance(part, ReasoningPart):
                thought: dict[str, Any] = {"type": "thought"}
                if part.text:
                    thought["summary"] = [{"type": "text", "text": part.text}]
                if part.signature:
                    thought["signature"] = part.signature
                content.append(thought)
            elif isinstance(part, ToolCallPart):
                content.append(
                    {
                        "type": "function_call",
                        "id": part.id or "",
                        "name": part.name,
                        "arguments": part.arguments,
                    }
                )
            else:
                content.append(
                    {
                        "type": "function_result",
                        "call_id": part.call_id or "",
                        "name": part.name or "",
                        "result": _result_text(part),
                    }
                )
        turns.append(
            {"role": "model" if message.role == "assistant" else "user", "content": content}
        )
    body: dict[str, Any] = {"model": request.model, "input": turns, "stream": request.stream}
    if request.system:
        body["system_instruction"] = request.system
    if request.tools:
        body["tools"] = _function_tools(request)
    config: dict[str, Any] = {}
    _put_settings(config, request, _SETTINGS)
    if request.reasoning is not None:
        if request.reasoning.effort:
            config["thinking_level"] = request.reasoning.effort
        if request.reasoning.summary:
            config["thinking_summaries"] = "auto"
    if config:
        body["generation_config"] = config
    if request.background:
        body["background"] = True
    return NativeRequest(path="/v1beta/interactions", body=body)


class InteractionsCodec(FamilyCodec):
    """Interactions bodies (see :class:`polystream.dialects._request_common.FamilyCodec`)."""

    family = "interactions"
    read_fields = frozenset(
        (
            "model", "input", "system_instruction", "tools", "generation_config", "stream",
            "background",
        )
    )  # fmt: skip
    config_read = (
        "generation_config",
        frozenset(
            (
                "max_output_tokens", "temperature", "top_p", "stop_sequences", "thinking_level",
                "thinking_summaries",
            )
        ),
    )  # fmt: skip
    decided = ("model", "stream", "background")
    settings = _SETTINGS

    def parse(self, body: dict[str, Any], *, model: str | None = None) -> Request:
        return _parse_interactions(body)

    def build(self, request: Request, *, framing: str = "sse") -> NativeRequest:
        return _build_interactions(request)


INTERACTIONS: Final[RequestCodec] = InteractionsCodec()
"""The ``gemini_interactions`` request codec."""
