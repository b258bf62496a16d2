"""The Chat Completions request codec (OpenAI and xAI ``/v1/chat/completions``): a
native body <-> the unified :class:`~polystream.request_model.Request`.

Opaque reasoning state in the history travels as ``reasoning_content`` on assistant
messages (its text only).
"""

from __future__ import annotations

from typing import Any, Final

from polystream.dialects._request_common import (
    FamilyCodec,
    _append,
    _args,
    _dump_args,
    _image_from_url,
    _image_url,
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
    Tool,
    ToolCallPart,
    ToolResultPart,
)

__all__ = ["CHAT", "ChatCodec"]

_SETTINGS: Final = {
    "max_tokens": "max_completion_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "stop": "stop",
}


def _parse_chat(body: dict[str, Any]) -> Request:
    messages: list[Message] = []
    system: list[str] = []
    for i, message in enumerate(_list(body.get("messages"), "messages")):
        message = _obj(message, f"messages[{i}]")
        role = message.get("role")
        param = f"messages[{i}]"
        content = message.get("content")
        if role in ("system", "developer"):
            system.append(_text_of(content or "", f"{param}.content"))
        elif role == "user":
            messages.append(Message(role="user", content=_chat_content(content, param)))
        elif role == "assistant":
            parts: list[Part] = []
            if isinstance(message.get("reasoning_content"), str):
                parts.append(ReasoningPart(text=message["reasoning_content"]))
            if content:
                parts.extend(_chat_content(content, param))
            for j, call in enumerate(_list(message.get("tool_calls") or [], f"{param}.tool_calls")):
                call = _obj(call, f"{param}.tool_calls[{j}]")
                function = _obj(call.get("function"), f"{param}.tool_calls[{j}].function")
                parts.append(
                    ToolCallPart(
                        id=call.get("id"),
                        name=_str(function.get("name"), f"{param}.tool_calls[{j}].function.name"),
                        arguments=_args(
                            function.get("arguments", ""),
                            f"{param}.tool_calls[{j}].function.arguments",
                        ),
                    )
                )
            messages.append(Message(role="assistant", content=parts))
        elif role == "tool":
            _append(
                messages,
                "tool",
                ToolResultPart(
                    call_id=message.get("tool_call_id"),
                    content=_text_of(content or "", f"{param}.content"),
                ),
            )
        else:
            raise RequestError("unknown role", param=f"{param}.role")
    tools = []
    for i, tool in enumerate(_list(body.get("tools") or [], "tools")):
        tool = _obj(tool, f"tools[{i}]")
        function = _obj(tool.get("function"), f"tools[{i}].function")
        tools.append(
            Tool(
                name=_str(function.get("name"), f"tools[{i}].function.name"),
                description=function.get("description"),
                parameters=function.get("parameters"),
            )
        )
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        choice = (choice.get("function") or {}).get("name")
    options = body.get("stream_options") or {}
    effort = body.get("reasoning_effort")
    max_tokens = _opt_int(body, "max_completion_tokens")
    if max_tokens is None:
        max_tokens = _opt_int(body, "max_tokens")
    return Request(
        model=_model(body),
        messages=messages,
        system="\n".join(system) or None,
        tools=tools,
        tool_choice=choice,
        max_tokens=max_tokens,
        temperature=_opt_float(body, "temperature"),
        top_p=_opt_float(body, "top_p"),
        stop=_stop(body.get("stop")),
        reasoning=ReasoningConfig(effort=effort) if isinstance(effort, str) else None,
        stream=bool(body.get("stream", False)),
        include_usage=bool(isinstance(options, dict) and options.get("include_usage")),
    )


def _chat_content(content: Any, param: str) -> list[Part]:
    if content is None:
        return []
    if isinstance(content, str):
        return [TextPart(text=content)]
    parts: list[Part] = []
    for j, part in enumerate(_list(content, f"{param}.content")):
        part = _obj(part, f"{param}.content[{j}]")
        if part.get("type") == "text":
            parts.append(TextPart(text=_str(part.get("text"), f"{param}.content[{j}].text")))
        elif part.get("type") == "image_url":
            url = _obj(part.get("image_url"), f"{param}.content[{j}].image_url").get("url")
            parts.append(_image_from_url(_str(url, f"{param}.content[{j}].image_url.url")))
        else:
            raise RequestError("unsupported content part", param=f"{param}.content[{j}].type")
    return parts


def _build_chat(request: Request) -> NativeRequest:
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    for message in request.messages:
        if message.role == "tool":
            for part in message.content:
                if isinstance(part, ToolResultPart):
                    messages.append(
                        {
                            "role": "tool",
                            "tool_call_id": part.call_id or "",
                            "content": _result_text(part),
                        }
                    )
            continue
        content: list[dict[str, Any]] = []
        calls: list[dict[str, Any]] = []
        reasoning: list[str] = []
        for part in message.content:
            if isinstance(part, TextPart):
                content.append({"type": "text", "text": part.text})
            elif isinstance(part, ImagePart):
                content.append({"type": "image_url", "image_url": {"url": _image_url(part)}})
            elif isinstance(part, ToolCallPart):
                calls.append(
                    {
                        "id": part.id or "",
                        "type": "function",
                        "function": {"name": part.name, "arguments": _dump_args(part.arguments)},
                    }
                )
            elif isinstance(part, ReasoningPart):
                reasoning.append(part.text)
            elif isinstance(part, ToolResultPart):
                messages.append(
                    {
                        "role": "tool",
                        "tool_call_id": part.call_id or "",
                        "content": _result_text(part),
                    }
                )
        if message.role == "user" and content:
            simple = all(c["type"] == "text" for c in content)
            messages.append(
                {
                    "role": "user",
                    "content": "".join(c["text"] for c in content) if simple else content,
                }
            )
        elif message.role == "assistant":
            out: dict[str, Any] = {
                "role": "assistant",
                "content": "".join(c.get("text", "") for c in content) or None,
            }
            if calls:
                out["tool_calls"] = calls
            if reasoning and any(reasoning):
                out["reasoning_content"] = "".join(reasoning)
            messages.append(out)
    body: dict[str, Any] = {"model": request.model, "messages": messages, "stream": request.stream}
    if request.stream and request.include_usage:
        body["stream_options"] = {"include_usage": True}
    if request.tools:
        body["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description or "",
                    "parameters": t.parameters or {"type": "object", "properties": {}},
                },
            }
            for t in request.tools
        ]
    if request.tool_choice:
        body["tool_choice"] = (
            request.tool_choice
            if request.tool_choice in ("auto", "none", "required")
            else {"type": "function", "function": {"name": request.tool_choice}}
        )
    _put_settings(body, request, _SETTINGS)
    if request.reasoning is not None and request.reasoning.effort:
        body["reasoning_effort"] = request.reasoning.effort
    return NativeRequest(path="/chat/completions", body=body)


class ChatCodec(FamilyCodec):
    """Chat Completions bodies (see
    :class:`polystream.dialects._request_common.FamilyCodec`)."""

    family = "chat"
    read_fields = frozenset(
        (
            "model", "messages", "tools", "tool_choice", "stream_options", "reasoning_effort",
            "max_completion_tokens", "max_tokens", "temperature", "top_p", "stop", "stream",
        )
    )  # fmt: skip
    decided = ("model", "stream", "stream_options")
    settings = _SETTINGS

    def parse(self, body: dict[str, Any], *, model: str | None = None) -> Request:
        return _parse_chat(body)

    def build(self, request: Request, *, framing: str = "sse") -> NativeRequest:
        return _build_chat(request)


CHAT: Final[RequestCodec] = ChatCodec()
"""The Chat Completions request codec (``openai_chat``, ``xai_chat``)."""
