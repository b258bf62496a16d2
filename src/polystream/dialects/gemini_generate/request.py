"""The Gemini ``generateContent`` request codec: a native body <-> the unified
:class:`~polystream.request_model.Request`.

Opaque reasoning state in the history travels as the ``thoughtSignature`` on the part
it belongs to.
"""

from __future__ import annotations

import json
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

__all__ = ["GENERATE", "GenerateCodec"]

_SETTINGS: Final = {
    "max_tokens": "maxOutputTokens",
    "temperature": "temperature",
    "top_p": "topP",
    "stop": "stopSequences",
}


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
    _put_settings(config, request, _SETTINGS)
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


class GenerateCodec(FamilyCodec):
    """``generateContent`` bodies (see
    :class:`polystream.dialects._request_common.FamilyCodec`): the model and streaming
    are in the URL, not the body."""

    family = "generate"
    read_fields = frozenset(("model", "contents", "systemInstruction", "tools", "generationConfig"))
    config_read = (
        "generationConfig",
        frozenset(("maxOutputTokens", "temperature", "topP", "stopSequences", "thinkingConfig")),
    )
    settings = _SETTINGS

    def parse(self, body: dict[str, Any], *, model: str | None = None) -> Request:
        return _parse_gemini(body, model)

    def build(self, request: Request, *, framing: str = "sse") -> NativeRequest:
        return _build_gemini(request, framing=framing)

    def read_whole(self, request: Request, extra: dict[str, Any]) -> None:
        if request.tool_choice and extra.get("toolConfig") == _gemini_tool_config(
            request.tool_choice
        ):
            del extra["toolConfig"]  # read whole: it is the tool choice


GENERATE: Final[RequestCodec] = GenerateCodec()
"""The ``gemini_generate`` request codec."""
