"""What the Gemini encoder gathers of a chunk before writing it: each block's parts, and
each candidate's parts and fields."""

from __future__ import annotations

from typing import Any

from polystream.events import (
    BlockStart,
    DataDelta,
)

from .wire import (
    EXECUTABLE_CODE_RANK,
    FUNCTION_CALL_RANK,
    INLINE_DATA_RANK,
    PART_RANK,
    TOOL_CALL_RANK,
    ordered,
)


class Part:
    """One part being assembled: its fields, the block it belongs to, key orders."""

    __slots__ = ("block", "fields", "inner_order", "order")

    def __init__(
        self, block: int, fields: dict[str, Any], extra: dict[str, Any] | None = None
    ) -> None:
        self.block = block
        self.fields = fields
        self.order: list[str] | None = None
        self.inner_order: list[str] | None = None
        if extra:
            rest = extra.get("part")
            if isinstance(rest, dict):
                for key, value in rest.items():
                    fields.setdefault(key, value)
            order = extra.get("part_order")
            self.order = order if isinstance(order, list) else None

    def render(self) -> dict[str, Any]:
        fields = self.fields
        for key, rank in (
            ("functionCall", FUNCTION_CALL_RANK),
            ("executableCode", EXECUTABLE_CODE_RANK),
            ("inlineData", INLINE_DATA_RANK),
            ("toolCall", TOOL_CALL_RANK),
        ):
            inner = fields.get(key)
            if isinstance(inner, dict):
                fields[key] = ordered(inner, rank, self.inner_order)
        return ordered(fields, PART_RANK, self.order)


class Candidate:
    """A candidate's share of the chunk being assembled."""

    __slots__ = ("citations", "fields", "parts")

    def __init__(self) -> None:
        self.parts: list[Part] = []
        self.fields: dict[str, Any] = {}
        self.citations: list[Any] = []


class Block:
    """What the encoder remembers of a unified block."""

    __slots__ = (
        "args",
        "candidate",
        "id",
        "image",
        "index",
        "kind",
        "name",
        "pending",
        "signature",
        "slot",
        "streamed",
        "value",
    )

    def __init__(self, start: BlockStart) -> None:
        self.index = start.index
        self.kind = start.kind
        self.candidate = start.candidate
        self.id = start.id or start.call_id
        self.name = start.name
        self.streamed = bool(start.extra and start.extra.get("streamed"))
        self.slot: Part | None = None  # the part this block fills (same dialect)
        self.args: list[str] | None = None  # buffered tool input / code (other dialects)
        self.pending: str | None = None  # this dialect's call arguments not yet JSON
        self.signature: str | None = None
        self.value = start.value  # whole tool input sent at the start (other dialects)
        self.image: DataDelta | None = None  # the latest refined partial image
