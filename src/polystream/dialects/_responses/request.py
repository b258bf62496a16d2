"""The Responses request codec (OpenAI and xAI ``/v1/responses``): a native body <->
the unified :class:`~polystream.request_model.Request`.

Opaque reasoning state in the history travels as ``reasoning`` items: their
``encrypted_content``, ``id`` and summary text.
"""

from __future__ import annotations

from typing import Any, Final

from polystream.dialects._request_common import (
    FamilyCodec,
    _append,
    _args,
    _dump_args,
    _function_tools,
    _image_from_url,
    _image_url,
    _list,
    _model,
    _obj,
    _opt_float,
    _opt_int,
    _parse_function_tools,
    _put_settings,
    _result_text,
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

__all__ = ["RESPONSES", "ResponsesCodec"]


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
    _put_settings(body, request, _SETTINGS)
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


_SETTINGS: Final = {
    "max_tokens": "max_output_tokens",
    "temperature": "temperature",
    "top_p": "top_p",
}


class ResponsesCodec(FamilyCodec):
    """Responses bodies (see :class:`polystream.dialects._request_common.FamilyCodec`)."""

    family = "responses"
    read_fields = frozenset(
        (
            "model", "input", "instructions", "tools", "tool_choice", "reasoning",
            "max_output_tokens", "temperature", "top_p", "stream", "background",
        )
    )  # fmt: skip
    decided = ("model", "stream", "background", "include")
    settings = _SETTINGS

    def parse(self, body: dict[str, Any], *, model: str | None = None) -> Request:
        return _parse_responses(body)

    def build(self, request: Request, *, framing: str = "sse") -> NativeRequest:
        return _build_responses(request)

    def read_whole(self, request: Request, extra: dict[str, Any]) -> None:
        if request.reasoning is not None and extra.get("include") == _REASONING_INCLUDE:
            del extra["include"]  # what the builder asks for with any reasoning


RESPONSES: Final[RequestCodec] = ResponsesCodec()
"""The Responses request codec (``openai_responses``, ``xai_responses``)."""
