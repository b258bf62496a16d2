"""Native request bodies <-> the unified :class:`~polystream.request.model.Request`.

``parse_request(dialect, body)`` reads a native request body (a client's request
arriving at the emulator or the gateway). ``build_request(dialect, request)`` writes
one (the client, or the gateway calling its upstream). Both are total over the fields
the unified model names. A body that is malformed for its dialect raises
:class:`RequestError` naming the offending parameter, and the shells answer with the
provider's own 400 error body.

Opaque state in the history is carried where each dialect has a place for it:

=====================  ==================================================================
dialect                 carrier
=====================  ==================================================================
Responses (OpenAI/xAI)  ``reasoning`` items: ``encrypted_content``, ``id``, summary text
Chat (OpenAI/xAI)       ``reasoning_content`` on assistant messages (text only)
Messages (Anthropic)    ``thinking`` blocks with ``signature``; ``redacted_thinking`` data
Gemini generate         ``thoughtSignature`` on the part it belongs to
Gemini Interactions     ``thought`` content with ``signature``
=====================  ==================================================================
"""

from __future__ import annotations

import json
from typing import Any, Final

import msgspec

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
from polystream.wire.jsondepth import DEFAULT_MAX_DEPTH, too_deep

__all__ = [
    "NativeRequest",
    "RequestError",
    "build_request",
    "extra_fields",
    "parse_request",
    "pass_through_body",
    "sent_extra",
]


# -- small readers ------------------------------------------------------------------------


def _obj(value: Any, param: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise RequestError("expected an object", param=param)
    return value


def _list(value: Any, param: str) -> list[Any]:
    if not isinstance(value, list):
        raise RequestError("expected an array", param=param)
    return value


def _str(value: Any, param: str) -> str:
    if not isinstance(value, str):
        raise RequestError("expected a string", param=param)
    return value


def _opt_int(body: dict[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise RequestError("expected a non-negative integer", param=key)
    return value


def _opt_float(body: dict[str, Any], key: str) -> float | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, int | float) or isinstance(value, bool):
        raise RequestError("expected a number", param=key)
    return float(value)


def _args(text: Any, param: str) -> Any:
    if isinstance(text, dict):
        return text
    if not isinstance(text, str):
        raise RequestError("expected JSON text", param=param)
    if not text.strip():
        return {}
    deep = too_deep(text)
    if deep is not None:
        raise RequestError(
            f"arguments nest deeper than {DEFAULT_MAX_DEPTH} levels (at character {deep})",
            param=param,
        )
    try:
        return json.loads(text)
    except ValueError:
        raise RequestError("arguments are not valid JSON", param=param) from None


def _dump_args(arguments: Any) -> str:
    return json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)


def _model(body: dict[str, Any]) -> str:
    model = body.get("model")
    if not isinstance(model, str) or not model:
        raise RequestError("model is required", param="model")
    return model


def _stop(value: Any) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return [_str(v, "stop") for v in _list(value, "stop")]


def _text_of(content: Any, param: str) -> str:
    if isinstance(content, str):
        return content
    parts = _list(content, param)
    out = []
    for i, part in enumerate(parts):
        part = _obj(part, f"{param}[{i}]")
        text = part.get("text")
        if isinstance(text, str):
            out.append(text)
    return "".join(out)


def _image_from_url(url: str) -> ImagePart:
    if url.startswith("data:") and ";base64," in url:
        head, data = url[5:].split(";base64,", 1)
        return ImagePart(data=data, mime_type=head or None)
    return ImagePart(url=url)


def _image_url(part: ImagePart) -> str:
    if part.url:
        return part.url
    return f"data:{part.mime_type or 'image/png'};base64,{part.data or ''}"


# -- OpenAI / xAI Responses ------------------------------------------------------------------


def _parse_responses(body: dict[str, Any]) -> Request:
    messages: list[Message] = []
    raw_input = body.get("input")
    if raw_input is None:
        raise RequestError("input is required", param="input")
    if isinstance(raw_input, str):
        messages.append(Message(role="user", content=[TextPart(text=raw_input)]))
    else:
        for i, item in enumerate(_list(raw_input, "input")):
            item = _obj(item, f"input[{i}]")
            kind = item.get("type", "message")
            param = f"input[{i}]"
            if kind == "message":
                role = item.get("role")
                if role in ("system", "developer"):
                    continue
                if role not in ("user", "assistant"):
                    raise RequestError(
                        "role must be user, assistant, system or developer", param=f"{param}.role"
                    )
                messages.append(
                    Message(role=role, content=_responses_content(item.get("content"), param))
                )
            elif kind == "function_call":
                _append(
                    messages,
                    "assistant",
                    ToolCallPart(
                        id=item.get("call_id"),
                        item_id=item.get("id"),
                        name=_str(item.get("name"), f"{param}.name"),
                        arguments=_args(item.get("arguments", ""), f"{param}.arguments"),
                    ),
                )
            elif kind == "function_call_output":
                output = item.get("output", "")
                _append(
                    messages,
                    "tool",
                    ToolResultPart(
                        call_id=item.get("call_id"),
                        content=output if isinstance(output, str) else _text_of(output, param),
                    ),
                )
            elif kind == "reasoning":
                text = _text_of(item.get("summary") or [], f"{param}.summary")
                _append(
                    messages,
                    "assistant",
                    ReasoningPart(
                        text=text,
                        id=item.get("id"),
                        encrypted_content=item.get("encrypted_content"),
                    ),
                )
            else:
                raise RequestError(f"unsupported input item type {kind!r}", param=f"{param}.type")
    system = body.get("instructions")
    tools = _parse_function_tools(body)
    reasoning = None
    if isinstance(body.get("reasoning"), dict):
        r = body["reasoning"]
        reasoning = ReasoningConfig(
            effort=r.get("effort"), summary=True if r.get("summary") else None
        )
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        choice = choice.get("name")
    return Request(
        model=_model(body),
        messages=messages,
        system=system if isinstance(system, str) else None,
        tools=tools,
        tool_choice=choice,
        max_tokens=_opt_int(body, "max_output_tokens"),
        temperature=_opt_float(body, "temperature"),
        top_p=_opt_float(body, "top_p"),
        reasoning=reasoning,
        stream=bool(body.get("stream", False)),
        background=bool(body.get("background", False)),
    )


def _responses_content(content: Any, param: str) -> list[Part]:
    if isinstance(content, str):
        return [TextPart(text=content)]
    parts: list[Part] = []
    for j, part in enumerate(_list(content, f"{param}.content")):
        part = _obj(part, f"{param}.content[{j}]")
        kind = part.get("type")
        if kind in ("input_text", "output_text", "text"):
            parts.append(TextPart(text=_str(part.get("text"), f"{param}.content[{j}].text")))
        elif kind == "input_image":
            parts.append(_image_from_url(_str(part.get("image_url"), f"{param}.content[{j}]")))
        elif kind == "refusal":
            parts.append(TextPart(text=part.get("refusal", "")))
        else:
            raise RequestError(
                f"unsupported content type {kind!r}", param=f"{param}.content[{j}].type"
            )
    return parts


def _append(messages: list[Message], role: str, part: Part) -> None:
    """Append a part to the last message when it has the same role, else a new one."""
    if messages and messages[-1].role == role:
        messages[-1].content.append(part)
    else:
        messages.append(Message(role=role, content=[part]))  # type: ignore[arg-type]


_REASONING_INCLUDE: Final = ["reasoning.encrypted_content"]
"""What a Responses request asks to include when it states reasoning (the encrypted
reasoning, to send back in a later turn's history)."""


def _build_responses(request: Request) -> NativeRequest:
    items: list[dict[str, Any]] = []
    for message in request.messages:
        texts: list[dict[str, Any]] = []

        def flush(role: str, texts: list[dict[str, Any]] = texts) -> None:
            if texts:
                items.append({"role": role, "content": list(texts)})
                texts.clear()

        for part in message.content:
            if isinstance(part, TextPart):
                kind = "output_text" if message.role == "assistant" else "input_text"
                texts.append({"type": kind, "text": part.text})
            elif isinstance(part, ImagePart):
                texts.append({"type": "input_image", "image_url": _image_url(part)})
            elif isinstance(part, ReasoningPart):
                flush(message.role)
                item: dict[str, Any] = {
                    "type": "reasoning",
                    "summary": [{"type": "summary_text", "text": part.text}] if part.text else [],
                }
                if part.id:
                    item["id"] = part.id
                if part.encrypted_content:
                    item["encrypted_content"] = part.encrypted_content
                items.append(item)
            elif isinstance(part, ToolCallPart):
                flush(message.role)
                call: dict[str, Any] = {
                    "type": "function_call",
                    "call_id": part.id or "",
                    "name": part.name,
                    "arguments": _dump_args(part.arguments),
                }
                if part.item_id:
                    call["id"] = part.item_id
                items.append(call)
            else:
                flush(message.role)
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": part.call_id or "",
                        "output": _result_text(part),
                    }
                )
        flush("user" if message.role == "tool" else message.role)
    body: dict[str, Any] = {"model": request.model, "input": items, "stream": request.stream}
    if request.system:
        body["instructions"] = request.system
    if request.tools:
        body["tools"] = _function_tools(request)
    if request.tool_choice:
        body["tool_choice"] = (
            request.tool_choice
            if request.tool_choice in ("auto", "none", "required")
            else {"type": "function", "name": request.tool_choice}
        )
    _put_settings(
        body,
        request,
        {"max_tokens": "max_output_tokens", "temperature": "temperature", "top_p": "top_p"},
    )
    if request.reasoning is not None:
        reasoning: dict[str, Any] = {}
        if request.reasoning.effort:
            reasoning["effort"] = request.reasoning.effort
        if request.reasoning.summary:
            reasoning["summary"] = "auto"
        body["reasoning"] = reasoning
        body["include"] = list(_REASONING_INCLUDE)
    if request.background:
        body["background"] = True
    if request.stop:
        # Responses has no stop sequences; the gateway refuses them before getting here.
        raise RequestError("stop sequences cannot be sent to the Responses API", param="stop")
    return NativeRequest(path="/responses", body=body)


_EMPTY_SCHEMA: Final[dict[str, Any]] = {"type": "object", "properties": {}}


def _parse_function_tools(body: dict[str, Any]) -> list[Tool]:
    """Read flat function tools (Responses, Interactions); other tool types cannot be
    translated to another provider."""
    tools = []
    for i, tool in enumerate(_list(body.get("tools") or [], "tools")):
        tool = _obj(tool, f"tools[{i}]")
        if tool.get("type") != "function":
            raise RequestError("only function tools can be translated", param=f"tools[{i}].type")
        tools.append(
            Tool(
                name=_str(tool.get("name"), f"tools[{i}].name"),
                description=tool.get("description"),
                parameters=tool.get("parameters"),
            )
        )
    return tools


def _function_tools(request: Request) -> list[dict[str, Any]]:
    """Function tools in the flat shape Responses and Interactions share."""
    return [
        {
            "type": "function",
            "name": tool.name,
            "description": tool.description or "",
            "parameters": tool.parameters or _EMPTY_SCHEMA,
        }
        for tool in request.tools
    ]


_CHAT_SETTINGS: Final = {
    "max_tokens": "max_completion_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "stop": "stop",
}
_GEMINI_SETTINGS: Final = {
    "max_tokens": "maxOutputTokens",
    "temperature": "temperature",
    "top_p": "topP",
    "stop": "stopSequences",
}
_INTERACTIONS_SETTINGS: Final = {
    "max_tokens": "max_output_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
    "stop": "stop_sequences",
}


def _put_settings(target: dict[str, Any], request: Request, names: dict[str, str]) -> None:
    """Copy the generation settings the request states (max tokens, temperature, top-p,
    stop sequences) into ``target`` under the dialect's own names."""
    for field, name in names.items():
        value = getattr(request, field)
        if value is not None and value != []:
            target[name] = value


def _result_text(part: ToolResultPart) -> str:
    if isinstance(part.content, str):
        return part.content
    return "".join(p.text for p in part.content if isinstance(p, TextPart))


# -- OpenAI / xAI Chat Completions -------------------------------------------------------------


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
    _put_settings(body, request, _CHAT_SETTINGS)
    if request.reasoning is not None and request.reasoning.effort:
        body["reasoning_effort"] = request.reasoning.effort
    return NativeRequest(path="/chat/completions", body=body)


# -- Anthropic / xAI Messages ----------------------------------------------------------------


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


def _build_messages(request: Request) -> NativeRequest:
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
    _put_settings(
        body, request, {"temperature": "temperature", "top_p": "top_p", "stop": "stop_sequences"}
    )
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
    return NativeRequest(path="/v1/messages", body=body)


# -- Gemini generateContent --------------------------------------------------------------------


def _parse_gemini(body: dict[str, Any], model: str | None) -> Request:
    messages: list[Message] = []
    for i, content in enumerate(_list(body.get("contents"), "contents")):
        content = _obj(content, f"contents[{i}]")
        role = content.get("role", "user")
        param = f"contents[{i}]"
        parts: list[Part] = []
        for j, part in enumerate(_list(content.get("parts", []), f"{param}.parts")):
            part = _obj(part, f"{param}.parts[{j}]")
            signature = part.get("thoughtSignature")
            if "text" in part:
                if part.get("thought"):
                    parts.append(ReasoningPart(text=part["text"], signature=signature))
                else:
                    parts.append(
                        TextPart(
                            text=_str(part["text"], f"{param}.parts[{j}].text"), signature=signature
                        )
                    )
            elif "inlineData" in part:
                data = _obj(part["inlineData"], f"{param}.parts[{j}].inlineData")
                parts.append(
                    ImagePart(
                        data=data.get("data"), mime_type=data.get("mimeType"), signature=signature
                    )
                )
            elif "functionCall" in part:
                call = _obj(part["functionCall"], f"{param}.parts[{j}].functionCall")
                name = _str(call.get("name"), f"{param}.parts[{j}].functionCall.name")
                parts.append(
                    ToolCallPart(
                        id=call.get("id"),
                        name=name,
                        arguments=call.get("args") or {},
                        signature=signature,
                    )
                )
            elif "functionResponse" in part:
                response = _obj(part["functionResponse"], f"{param}.parts[{j}].functionResponse")
                value = response.get("response")
                text: str = (
                    value["result"]
                    if isinstance(value, dict) and isinstance(value.get("result"), str)
                    else json.dumps(value)
                )
                parts.append(
                    ToolResultPart(
                        call_id=response.get("id"), name=response.get("name"), content=text
                    )
                )
            else:
                raise RequestError("unsupported part", param=f"{param}.parts[{j}]")
        if role == "model":
            messages.append(Message(role="assistant", content=parts))
        elif parts and all(isinstance(p, ToolResultPart) for p in parts):
            messages.append(Message(role="tool", content=parts))
        else:
            messages.append(Message(role="user", content=parts))
    system = body.get("systemInstruction")
    system_text = (
        _text_of(system.get("parts", []), "systemInstruction.parts")
        if isinstance(system, dict)
        else None
    )
    tools = []
    for i, tool in enumerate(_list(body.get("tools") or [], "tools")):
        tool = _obj(tool, f"tools[{i}]")
        declarations = _list(
            tool.get("functionDeclarations") or [], f"tools[{i}].functionDeclarations"
        )
        for j, decl in enumerate(declarations):
            decl = _obj(decl, f"tools[{i}].functionDeclarations[{j}]")
            tools.append(
                Tool(
                    name=_str(decl.get("name"), f"tools[{i}].functionDeclarations[{j}].name"),
                    description=decl.get("description"),
                    parameters=decl.get("parameters") or decl.get("parametersJsonSchema"),
                )
            )
    config = body.get("generationConfig") or {}
    config = _obj(config, "generationConfig")
    thinking = _obj(config.get("thinkingConfig") or {}, "generationConfig.thinkingConfig")
    reasoning = None
    if thinking:
        reasoning = ReasoningConfig(
            effort=thinking.get("thinkingLevel"),
            budget_tokens=thinking.get("thinkingBudget"),
            summary=thinking.get("includeThoughts"),
        )
    if model is None:
        model = _model(body)
    return Request(
        model=model,
        messages=messages,
        system=system_text or None,
        tools=tools,
        tool_choice=_gemini_tool_choice(body),
        max_tokens=_opt_int(config, "maxOutputTokens"),
        temperature=_opt_float(config, "temperature"),
        top_p=_opt_float(config, "topP"),
        stop=_stop(config.get("stopSequences")),
        reasoning=reasoning,
        stream=True,
    )


def _gemini_tool_config(choice: str) -> dict[str, Any]:
    """Gemini's ``toolConfig`` for a unified tool choice."""
    mode = {"auto": "AUTO", "required": "ANY", "none": "NONE"}.get(choice)
    return {
        "functionCallingConfig": {"mode": mode}
        if mode
        else {"mode": "ANY", "allowedFunctionNames": [choice]}
    }


def _gemini_tool_choice(body: dict[str, Any]) -> str | None:
    """The unified tool choice of a Gemini ``toolConfig`` (None: none, or one that a
    tool choice cannot state, which then stays in the request's ``extra``)."""
    config = body.get("toolConfig")
    calling = config.get("functionCallingConfig") if isinstance(config, dict) else None
    if not isinstance(calling, dict):
        return None
    mode = calling.get("mode")
    allowed = calling.get("allowedFunctionNames")
    if mode == "ANY" and isinstance(allowed, list) and len(allowed) == 1:
        choice = allowed[0]
        return choice if isinstance(choice, str) and choice else None
    return {"AUTO": "auto", "ANY": "required", "NONE": "none"}.get(mode)  # type: ignore[arg-type]


def _build_gemini(request: Request, *, framing: str = "sse") -> NativeRequest:
    contents: list[dict[str, Any]] = []
    names = {
        p.id: p.name
        for m in request.messages
        for p in m.content
        if isinstance(p, ToolCallPart) and p.id
    }
    for message in request.messages:
        parts: list[dict[str, Any]] = []
        for part in message.content:
            out: dict[str, Any]
            if isinstance(part, TextPart):
                out = {"text": part.text}
            elif isinstance(part, ReasoningPart):
                if part.signature is None and not part.text:
                    continue
                out = {"text": part.text, "thought": True}
            elif isinstance(part, ImagePart):
                if part.data is None:
                    out = {
                        "fileData": {"fileUri": part.url, "mimeType": part.mime_type or "image/png"}
                    }
                else:
                    out = {
                        "inlineData": {"mimeType": part.mime_type or "image/png", "data": part.data}
                    }
            elif isinstance(part, ToolCallPart):
                call: dict[str, Any] = {"name": part.name, "args": part.arguments}
                if part.id:
                    call["id"] = part.id
                out = {"functionCall": call}
            else:
                response: dict[str, Any] = {
                    "name": part.name or names.get(part.call_id or "", ""),
                    "response": {"result": _result_text(part)},
                }
                if part.call_id:
                    response["id"] = part.call_id
                out = {"functionResponse": response}
            if part.signature is not None:
                out["thoughtSignature"] = part.signature
            parts.append(out)
        contents.append(
            {"role": "model" if message.role == "assistant" else "user", "parts": parts}
        )
    body: dict[str, Any] = {"contents": contents}
    if request.system:
        body["systemInstruction"] = {"parts": [{"text": request.system}]}
    if request.tools:
        body["tools"] = [
            {
                "functionDeclarations": [
                    {
                        "name": t.name,
                        "description": t.description or "",
                        **({"parameters": t.parameters} if t.parameters else {}),
                    }
                    for t in request.tools
                ]
            }
        ]
    if request.tool_choice:
        body["toolConfig"] = _gemini_tool_config(request.tool_choice)
    config: dict[str, Any] = {}
    _put_settings(config, request, _GEMINI_SETTINGS)
    if request.reasoning is not None:
        thinking: dict[str, Any] = {}
        if request.reasoning.effort:
            thinking["thinkingLevel"] = request.reasoning.effort
        if request.reasoning.budget_tokens is not None:
            thinking["thinkingBudget"] = request.reasoning.budget_tokens
        if request.reasoning.summary:
            thinking["includeThoughts"] = True
        config["thinkingConfig"] = thinking
    if config:
        body["generationConfig"] = config
    method = "streamGenerateContent" if request.stream else "generateContent"
    query = {"alt": "sse"} if request.stream and framing == "sse" else {}
    return NativeRequest(path=f"/v1beta/models/{request.model}:{method}", body=body, query=query)


# -- Gemini Interactions ---------------------------------------------------------------------


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
    _put_settings(config, request, _INTERACTIONS_SETTINGS)
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


# -- dispatch -----------------------------------------------------------------------------------


_FAMILY: dict[str, str] = {
    "openai_responses": "responses",
    "xai_responses": "responses",
    "openai_chat": "chat",
    "xai_chat": "chat",
    "anthropic_messages": "messages",
    "xai_messages": "messages",
    "gemini_generate": "gemini",
    "gemini_interactions": "interactions",
}
"""Each dialect's request family: the dialects whose request bodies have one shape."""


def parse_request(dialect: str, body: Any, *, model: str | None = None) -> Request:
    """Parse a native request body into a :class:`Request`.

    Args:
        dialect: The dialect the body is written in.
        body: The parsed JSON body.
        model: The model from the URL path (Gemini ``models/{model}:...``).

    Raises:
        RequestError: The body is malformed for the dialect.
    """
    body = _obj(body, "body")
    family = _FAMILY.get(dialect)
    if family == "responses":
        request = _parse_responses(body)
    elif family == "chat":
        request = _parse_chat(body)
    elif family == "messages":
        request = _parse_messages(body)
    elif family == "gemini":
        request = _parse_gemini(body, model)
    elif family == "interactions":
        request = _parse_interactions(body)
    else:
        raise RequestError(f"no request codec for dialect {dialect!r}")
    extra = _unread(body, family)
    if (
        extra is not None
        and request.tool_choice
        and family == "gemini"
        and extra.get("toolConfig") == _gemini_tool_config(request.tool_choice)
    ):
        del extra["toolConfig"]  # read whole: it is the tool choice
    if (
        extra is not None
        and request.reasoning is not None
        and family == "responses"
        and extra.get("include") == _REASONING_INCLUDE
    ):
        del extra["include"]  # what the builder asks for with any reasoning
    request.extra = extra or None
    request.origin = dialect
    return _checked(request)


_READ: dict[str, frozenset[str]] = {
    "responses": frozenset(
        (
            "model", "input", "instructions", "tools", "tool_choice", "reasoning",
            "max_output_tokens", "temperature", "top_p", "stream", "background",
        )
    ),
    "chat": frozenset(
        (
            "model", "messages", "tools", "tool_choice", "stream_options", "reasoning_effort",
            "max_completion_tokens", "max_tokens", "temperature", "top_p", "stop", "stream",
        )
    ),
    "messages": frozenset(
        (
            "model", "messages", "system", "tools", "tool_choice", "thinking", "max_tokens",
            "temperature", "top_p", "stop_sequences", "stream",
        )
    ),
    "gemini": frozenset(("model", "contents", "systemInstruction", "tools", "generationConfig")),
    "interactions": frozenset(
        (
            "model", "input", "system_instruction", "tools", "generation_config", "stream",
            "background",
        )
    ),
}  # fmt: skip
"""The top-level fields each dialect family's parser reads (see :func:`_unread`)."""

_CONFIG_READ: dict[str, tuple[str, frozenset[str]]] = {
    "gemini": (
        "generationConfig",
        frozenset(("maxOutputTokens", "temperature", "topP", "stopSequences", "thinkingConfig")),
    ),
    "interactions": (
        "generation_config",
        frozenset(
            (
                "max_output_tokens", "temperature", "top_p", "stop_sequences", "thinking_level",
                "thinking_summaries",
            )
        ),
    ),
}  # fmt: skip
"""The generation config object of the dialects that have one, and the fields of it
their parsers read."""


def _unread(body: dict[str, Any], family: str) -> dict[str, Any] | None:
    """The fields of ``body`` its parser did not read (null ones left out), for
    :attr:`Request.extra`; None when there are none."""
    read = _READ[family]
    extra = {k: v for k, v in body.items() if k not in read and v is not None}
    config = _CONFIG_READ.get(family)
    if config is not None:
        name, fields = config
        settings = body.get(name)
        if isinstance(settings, dict):
            rest = {k: v for k, v in settings.items() if k not in fields and v is not None}
            if rest:
                extra[name] = rest
    return extra or None


def sent_extra(dialect: str, request: Request) -> bool:
    """Whether :func:`build_request` sends ``request.extra`` to ``dialect`` (the dialect
    it was parsed from, or any when it was made in code)."""
    return bool(request.extra) and request.origin in (None, dialect)


def extra_fields(request: Request) -> list[str]:
    """The names of the fields in ``request.extra``, sorted (a generation config's
    as ``generationConfig.responseSchema``)."""
    names: list[str] = []
    configs = {name for name, _ in _CONFIG_READ.values()}
    for name, value in (request.extra or {}).items():
        if name in configs and isinstance(value, dict):
            names += (f"{name}.{field}" for field in value)
        else:
            names.append(name)
    return sorted(names)


def _checked(request: Request) -> Request:
    """``request`` with every field of the type the model declares (a few µs): the
    parsers check what they read to build it, and this catches a value of the wrong
    type they store as it is (an id, a text, an effort), which would otherwise fail
    later, untyped, while a body is built from it."""
    try:
        return msgspec.convert(msgspec.to_builtins(request), Request)
    except msgspec.ValidationError as exc:
        message, _, where = str(exc).partition(" - at `$.")
        raise RequestError(message, param=where.rstrip("`") or None) from None
    except TypeError as exc:  # a value no JSON body holds (a set, an object)
        raise RequestError(str(exc)) from None


def build_request(dialect: str, request: Request, *, framing: str = "sse") -> NativeRequest:
    """Build the native request for ``dialect`` from a :class:`Request`.

    Raises:
        RequestError: The request holds something the dialect cannot express.
    """
    if dialect in ("openai_responses", "xai_responses"):
        native = _build_responses(request)
    elif dialect in ("openai_chat", "xai_chat"):
        native = _build_chat(request)
    elif dialect == "anthropic_messages":
        native = _build_messages(request)
    elif dialect == "xai_messages":
        # xAI's base URL already ends in /v1 (https://api.x.ai/v1).
        native = _build_messages(request)
        native = NativeRequest(path="/messages", body=native.body, query=native.query)
    elif dialect == "gemini_generate":
        native = _build_gemini(request, framing=framing)
    elif dialect == "gemini_interactions":
        native = _build_interactions(request)
    else:
        raise RequestError(f"no request codec for dialect {dialect!r}")
    if request.extra and sent_extra(dialect, request):
        _add_extra(native.body, request.extra)
    return native


_DECIDED: dict[str, tuple[str, ...]] = {
    "responses": ("model", "stream", "background", "include"),
    "chat": ("model", "stream", "stream_options"),
    "messages": ("model", "stream"),
    "gemini": (),
    "interactions": ("model", "stream", "background"),
}
"""The top-level fields of each dialect family's body that a caller of
:func:`build_request` decides (a gateway's route names the model, and it always
streams): the ones :func:`pass_through_body` takes from the built body."""


def pass_through_body(dialect: str, body: dict[str, Any], built: dict[str, Any]) -> dict[str, Any]:
    """The body to send for a request parsed from ``body`` and built again as ``built``
    for the same ``dialect``: ``body`` as it came, every field of it (nested ones too,
    such as Anthropic's ``cache_control`` or a Chat message's ``name``), but for the
    fields the caller decides, taken from ``built``: the model, streaming, and Chat's
    ``stream_options``, Responses' ``background`` and ``include``, Interactions'
    ``background`` where ``built`` sets them (an object both have is joined, ``built``'s
    fields winning; Responses' ``include`` lists are joined). A body that ``built``
    makes a background one (Responses, Interactions) loses a ``store: false``:
    background responses are stored.

    Raises:
        RequestError: No request codec for ``dialect``.
    """
    family = _FAMILY.get(dialect)
    if family is None:
        raise RequestError(f"no request codec for dialect {dialect!r}")
    out = dict(body)
    for name in _DECIDED[family]:
        value = built.get(name)
        if value is None:
            continue
        given = out.get(name)
        if isinstance(value, dict) and isinstance(given, dict):
            out[name] = {**given, **value}
        elif isinstance(value, list) and isinstance(given, list):
            out[name] = given + [item for item in value if item not in given]
        else:
            out[name] = value
    if built.get("background") and out.get("store") is False:
        # A background response or interaction is stored (to be read back): the
        # caller's background wins over the client's store.
        del out["store"]
    return out


def _add_extra(body: dict[str, Any], extra: dict[str, Any]) -> None:
    """Add the fields of ``extra`` that the built ``body`` does not set (inside an object
    both have, such as Gemini's ``generationConfig``, field by field): what the unified
    request says wins."""
    for name, value in extra.items():
        built = body.get(name)
        if built is None:
            body[name] = value
        elif isinstance(built, dict) and isinstance(value, dict):
            body[name] = {**value, **built}
