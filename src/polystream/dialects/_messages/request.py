"""The Messages request codec (Anthropic and xAI ``/v1/messages``): a native body <->
the unified :class:`~polystream.request_model.Request`.

Opaque reasoning state in the history travels as ``thinking`` blocks with their
``signature``, and ``redacted_thinking`` blocks with their data.
"""

from __future__ import annotations

from typing import Any, Final

from polystream.dialects._request_common import (
    FamilyCodec,
    _list,
    _model,
    _obj,
    _opt_float,
    _opt_int,
    _put_settings,
    _result_text,
    _stop,
    _str,
    _text_of,
)
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
    Tool,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["MessagesCodec"]

_SETTINGS: Final = {"temperature": "temperature", "top_p": "top_p", "stop": "stop_sequences"}
"""The generation settings under their Messages names (``max_tokens`` is required, and
written by the builder itself)."""


def _parse_messages(body: dict[str, Any]) -> Request:
    messages: list[Message] = []
    for i, message in enumerate(_list(body.get("messages"), "messages")):
        message = _obj(message, f"messages[{i}]")
        role = message.get("role")
        param = f"messages[{i}]"
        if role not in ("user", "assistant"):
            raise RequestError("role must be user or assistant", param=f"{param}.role")
        content = message.get("content")
        if isinstance(content, str):
            messages.append(Message(role=role, content=[TextPart(text=content)]))
            continue
        parts: list[Part] = []
        for j, block in enumerate(_list(content, f"{param}.content")):
            block = _obj(block, f"{param}.content[{j}]")
            kind = block.get("type")
            where = f"{param}.content[{j}]"
            if kind == "text":
                parts.append(TextPart(text=_str(block.get("text"), f"{where}.text")))
            elif kind == "image":
                source = _obj(block.get("source"), f"{where}.source")
                if source.get("type") == "url":
                    parts.append(ImagePart(url=source.get("url")))
                else:
                    parts.append(
                        ImagePart(data=source.get("data"), mime_type=source.get("media_type"))
                    )
            elif kind == "tool_use":
                parts.append(
                    ToolCallPart(
                        id=block.get("id"),
                        name=_str(block.get("name"), f"{where}.name"),
                        arguments=block.get("input") or {},
                    )
                )
            elif kind == "tool_result":
                result = block.get("content", "")
                parts.append(
                    ToolResultPart(
                        call_id=block.get("tool_use_id"),
                        content=result
                        if isinstance(result, str)
                        else _text_of(result, f"{where}.content"),
                        is_error=bool(block.get("is_error", False)),
                    )
                )
            elif kind == "thinking":
                parts.append(
                    ReasoningPart(text=block.get("thinking", ""), signature=block.get("signature"))
                )
            elif kind == "redacted_thinking":
                parts.append(ReasoningPart(redacted=block.get("data")))
            else:
                raise RequestError(f"unsupported content block {kind!r}", param=f"{where}.type")
        if role == "user" and parts and all(isinstance(p, ToolResultPart) for p in parts):
            messages.append(Message(role="tool", content=parts))
        else:
            messages.append(Message(role=role, content=parts))
    if "max_tokens" not in body:
        raise RequestError("max_tokens is required", param="max_tokens")
    system = body.get("system")
    if isinstance(system, list):
        system = _text_of(system, "system")
    tools = []
    for i, tool in enumerate(_list(body.get("tools") or [], "tools")):
        tool = _obj(tool, f"tools[{i}]")
        if "input_schema" not in tool:
            raise RequestError(
                "only custom tools with input_schema can be translated", param=f"tools[{i}]"
            )
        tools.append(
            Tool(
                name=_str(tool.get("name"), f"tools[{i}].name"),
                description=tool.get("description"),
                parameters=tool.get("input_schema"),
            )
        )
    thinking = body.get("thinking")
    reasoning = None
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        reasoning = ReasoningConfig(budget_tokens=thinking.get("budget_tokens"), summary=True)
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        choice = {"auto": "auto", "any": "required", "none": "none"}.get(
            choice.get("type", ""), choice.get("name")
        )
    return Request(
        model=_model(body),
        messages=messages,
        system=system if isinstance(system, str) else None,
        tools=tools,
        tool_choice=choice,
        max_tokens=_opt_int(body, "max_tokens"),
        temperature=_opt_float(body, "temperature"),
        top_p=_opt_float(body, "top_p"),
        stop=_stop(body.get("stop_sequences")),
        reasoning=reasoning,
        stream=bool(body.get("stream", False)),
    )


def _build_messages(request: Request, path: str) -> NativeRequest:
    messages: list[dict[str, Any]] = []
    for message in request.messages:
        blocks: list[dict[str, Any]] = []
        for part in message.content:
            if isinstance(part, TextPart):
                blocks.append({"type": "text", "text": part.text})
            elif isinstance(part, ImagePart):
                source = (
                    {"type": "url", "url": part.url}
                    if part.url
                    else {
                        "type": "base64",
                        "media_type": part.mime_type or "image/png",
                        "data": part.data or "",
                    }
                )
                blocks.append({"type": "image", "source": source})
            elif isinstance(part, ReasoningPart):
                if part.redacted is not None:
                    blocks.append({"type": "redacted_thinking", "data": part.redacted})
                elif part.signature is not None:
                    # A thinking block is only valid with its signature.
                    blocks.append(
                        {"type": "thinking", "thinking": part.text, "signature": part.signature}
                    )
            elif isinstance(part, ToolCallPart):
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": part.id or "",
                        "name": part.name,
                        "input": part.arguments if isinstance(part.arguments, dict) else {},
                    }
                )
            else:
                result: dict[str, Any] = {
                    "type": "tool_result",
                    "tool_use_id": part.call_id or "",
                    "content": _result_text(part),
                }
                if part.is_error:
                    result["is_error"] = True
                blocks.append(result)
        role = "user" if message.role == "tool" else message.role
        if messages and messages[-1]["role"] == role:
            messages[-1]["content"].extend(blocks)
        else:
            messages.append({"role": role, "content": blocks})
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens or 4096,
        "messages": messages,
        "stream": request.stream,
    }
    if request.system:
        body["system"] = request.system
    if request.tools:
        body["tools"] = [
            {
                "name": t.name,
                "description": t.description or "",
                "input_schema": t.parameters or {"type": "object", "properties": {}},
            }
            for t in request.tools
        ]
    if request.tool_choice:
        body["tool_choice"] = (
            {"type": {"auto": "auto", "required": "any", "none": "none"}[request.tool_choice]}
            if request.tool_choice in ("auto", "required", "none")
            else {"type": "tool", "name": request.tool_choice}
        )
    _put_settings(body, request, _SETTINGS)
    if request.reasoning is not None and (
        request.reasoning.budget_tokens or request.reasoning.effort
    ):
        budget = request.reasoning.budget_tokens or {
            "minimal": 1024,
            "low": 2048,
            "medium": 8192,
            "high": 24576,
        }.get(request.reasoning.effort or "", 4096)
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
        body["max_tokens"] = max(body["max_tokens"], budget + 1024)
    return NativeRequest(path=path, body=body)


class MessagesCodec(FamilyCodec):
    """Messages bodies (see :class:`polystream.dialects._request_common.FamilyCodec`).

    Args:
        path: The path a built request is sent to, relative to the provider's base URL.
    """

    family = "messages"
    read_fields = frozenset(
        (
            "model", "messages", "system", "tools", "tool_choice", "thinking", "max_tokens",
            "temperature", "top_p", "stop_sequences", "stream",
        )
    )  # fmt: skip
    decided = ("model", "stream")
    settings = _SETTINGS

    def __init__(self, path: str) -> None:
        self.path = path

    def parse(self, body: dict[str, Any], *, model: str | None = None) -> Request:
        return _parse_messages(body)

    def build(self, request: Request, *, framing: str = "sse") -> NativeRequest:
        return _build_messages(request, self.path)
