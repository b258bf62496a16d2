"""Chunks that fit the template, read inline: one at a time as the framing hands them
over (``_matched``), or a run of them read from the feed's bytes without the framing's
parser (``_take``), coalesced as the decoder's :data:`~polystream.dialects._base.Coalesce`
mode asks."""

from __future__ import annotations

from typing import Any, Final

import msgspec

from polystream.dialects._base import UsageRun, UsageTexts
from polystream.errors import RemoteProtocolError
from polystream.events import Event, TextDelta, UsageUpdate

from ._bare import BareTextDecoder
from ._template import (
    CHECK_OBJECT,
    OBJECT_DECODER,
    ONES,
    TEXT_DECODER,
    Layout,
    Template,
    match_template,
    templates_for,
)
from .usage import convert as convert_usage
from .wire import usage_shape

# Failed attempts to find a template before a decoder stops trying.
_TEMPLATE_TRIES: Final = 4
# How far after the text _take looks for the end of usageMetadata (Google's is a few
# hundred bytes): the work per chunk stays bounded whatever the input.
_USAGE_WINDOW: Final = 4096


class InlineDecoder(BareTextDecoder):
    """:class:`~._bare.BareTextDecoder` that learns the template of the usual chunk
    (``_learn``) and reads the chunks that fit it inline."""

    _inline_hooks: bool
    """Whether the event and element hooks are the decoder's own (set by
    :class:`~.decode.GeminiGenerateDecoder`): only then are chunks read inline."""

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._template: Template | None = None
        self._template_tries = _TEMPLATE_TRIES

    def _take(self, data: bytes, pos: int, out: list[Event]) -> int:
        """Read the chunks from ``data[pos]`` on that fit the template, without the
        framing's parser: SSE event blocks (``data: `` + the chunk's JSON text + a
        blank line, LF or CRLF line ends) or JSON-array elements (Google's
        pretty-printed layout, each followed by its comma line). Returns where the
        first chunk that does not fit (or is not whole in ``data``) begins; the
        parser is told what was read (``skip`` of
        :class:`~polystream.wire.sse.SSEDecoder` and
        :class:`~polystream.wire.jsonarray.JSONArrayDecoder`), and the rest of
        ``data`` takes the usual way.

        The events are those the parser's frames would give, chunk for chunk: an SSE
        block of that form is one event whose data is its JSON text, a JSON-array
        element of that form followed by ``,`` is one element, and the parser would
        take either on its own fast path. Each piece is compared (as a slice: on bytes
        that is cheaper than ``startswith``, a call with arguments) and both values
        must parse: the text is a JSON string, so it ends at its first quote not
        escaped and holds no raw line break; for SSE the usage object must hold no raw
        CR or LF either (JSON whitespace, but a line end there). The limits are the
        parser's. Only while nothing else is pending: the parser idle, no bare text
        under way, the stream not finished, no error deferred.
        """
        template = self._template
        sse = self._sse
        array = self._array if sse is None else None
        if (
            template is None
            or template.block is None
            or (sse is None and array is None)
            or self.finished
            or self._deferred is not None
            or not self._inline_hooks
        ):
            return pos
        if sse is not None:
            point = sse.takeover()
            if point is None or self._bare_parts or self._bare_ready or not self._at_line_start:
                return pos
            count, consumed = point
            after_element = False
            limit = sse.block_limit  # the parser's fast-path bound
            max_depth = self._max_depth  # (the framing's check, see FramedDecoder.feed)
        else:
            assert array is not None
            taking = array.takeover()
            if taking is None:
                return pos
            count, consumed, after_element = taking
            limit = array.max_element_size
            # (The brackets around the text are within it: the template was learned
            # from an element the framing took.)
            max_depth = array.max_depth
        head, head_size, mid, mid_size, suf, suf_size, block_ends = template.block
        tail, tail_size = template.block_tail  # suf and what ends the chunk, as last seen
        find = data.find
        n = len(data)
        base = consumed - pos
        first = pos
        counted = count
        previous = self._previous
        append = out.append
        comma = True  # (array) what was read ends after a comma, not after an element
        taken = pos  # where the last chunk read began
        # With coalesce "result", the chunks read inline give their events at the end,
        # as one run: once a chunk is read inline, so is every chunk after it that fits (what
        # that depends on, the extra and the block state, does not change inline).
        # Their usage texts are checked and kept (usages, all of one shape: see
        # usage_shape), and only the last of a shape is read, when the shape changes
        # or the run ends (_settle). (What is kept is less than the events those
        # chunks would have given.)
        # With "usage" instead (until an error was given: _gave_error), only their
        # usage updates are given as one, at the end of the run, and noted as a
        # UsageRun; their texts are given as usual.
        # With "usage_texts", each of their usage texts is kept for the encoder too
        # (chunk_usages, and its shape's digits made 1s in chunk_ones, one object while
        # they do not change), in the UsageRun.
        mode = self._coalesce
        join = mode == "result"
        coalesce = join or (mode != "off" and not self._gave_error)
        keep_texts = coalesce and mode == "usage_texts"
        chunk_usages: list[bytes] = []
        chunk_ones: list[bytes] = []
        run: list[str] = []  # the texts of those chunks (when joined)
        general = 0  # the chunks read by _matched, before the run
        run_index = 0
        run_extra: dict[str, Any] | None = None
        usages: list[bytes] = []
        meta: Any = None  # a chunk's usageMetadata (None: its text is in usages)
        state: Any = None  # (typed loosely: the inline test below checks its fields)
        if after_element:
            # The element before was read whole, its comma comes first.
            for ending, size in block_ends:
                if data[pos : pos + size] == ending:
                    pos += size
                    break
            else:
                return pos
        try:
            while data[pos : pos + head_size] == head:
                start = pos + head_size
                # The text ends at its first quote unless that one is escaped; then at
                # the first mid, and the string must still parse.
                close = find(34, start + 1)  # '"'
                if close < 0:
                    break
                if data[close - 1] == 92:  # a backslash
                    close = find(mid, start + 1)
                    if close < 0:
                        break
                elif data[close : close + mid_size] != mid:
                    break
                begin = close + mid_size
                # The usage object is tried at the length of the last one, else it ends
                # where suf first occurs (near: the work per chunk stays bounded).
                end = begin + template.block_usage_size
                ends = True  # (array) with its comma
                if end != begin and data[end : end + tail_size] == tail:
                    after = end + tail_size
                else:
                    if end == begin or data[end : end + suf_size] != suf:
                        end = find(suf, begin, begin + _USAGE_WINDOW + suf_size)
                        if end < 0:
                            break
                    stop = end + suf_size
                    if stop == n and sse is None:
                        # An element that ends the feed (as each does when a network
                        # read holds one): its comma comes next.
                        after = stop
                        ends = False
                    else:
                        for ending, size in block_ends:
                            if data[stop : stop + size] == ending:
                                tail = suf + ending
                                tail_size = suf_size + size
                                template.block_tail = (tail, tail_size)
                                after = end + tail_size
                                break
                        else:
                            break
                if end + suf_size - pos > limit:
                    break  # the parser raises BufferLimitExceeded
                usage_text = data[begin:end]
                # The depth bound, before parsing: one level for the chunk object, and
                # at most one per bracket the usage object opens, which (when it
                # parses, each has its closer) are at most half its bytes.
                if (
                    len(usage_text) // 2 + 1 > max_depth
                    and usage_text.count(b"{") + usage_text.count(b"[") + 1 > max_depth
                ):
                    break
                extra = previous.extra
                state = template.state
                # The chunk continues the open text run, and its extra is the chunk
                # before's: it is read inline (below), else by _matched.
                inline = (
                    extra is not None
                    and extra is template.extra
                    and state is not None
                    and state.open is not None
                    and state.open_kind == "text"
                )
                try:
                    text = TEXT_DECODER.decode(data[start : close + 1])
                    if coalesce and inline:
                        # A chunk read inline below, coalesced.
                        if sse is not None and (10 in usage_text or 13 in usage_text):
                            break  # LF, CR: SSE line ends
                        ones = usage_text.translate(ONES)
                        if ones != template.ones:
                            shape = template.shape
                            template.ones = ones
                            template.shape = usage_shape(ones)
                            if usages and template.shape != shape:
                                self._settle(template, usages)
                                usages = []
                        if template.shape is not None:
                            CHECK_OBJECT.decode(usage_text)
                            meta = None
                        else:
                            meta = OBJECT_DECODER.decode(usage_text)
                    elif usage_text == template.block_usage:
                        meta = template.block_meta
                    else:
                        if sse is not None and (10 in usage_text or 13 in usage_text):
                            break  # LF, CR: SSE line ends
                        meta = OBJECT_DECODER.decode(usage_text)
                        template.block_usage = usage_text
                        template.block_usage_size = end - begin
                        template.block_meta = meta
                except msgspec.DecodeError:
                    break
                count += 1
                taken = pos
                pos = after
                comma = ends
                if inline:
                    # _matched, inlined for its most usual case.
                    if coalesce:
                        if join:
                            run.append(text)
                        else:
                            append(TextDelta(index=state.open, delta=text))
                            if keep_texts:
                                chunk_usages.append(usage_text)
                                chunk_ones.append(template.ones)
                        run_index = state.open
                        run_extra = extra
                        if meta is None:
                            usages.append(usage_text)
                            continue
                        if usages:
                            self._settle(template, usages)
                            usages = []
                    else:
                        append(TextDelta(index=state.open, delta=text))
                    usage = previous.usage
                    if usage is None or meta is not previous.meta:
                        # _new_usage, inlined: one call less on nearly every chunk.
                        usage, mask = convert_usage(meta)
                        if mask:
                            if self._usage_mask & ~mask:
                                assert self._usage_last is not None
                                self._usage_base = self._usage_base.merged(self._usage_last)
                            self._usage_last = usage
                            self._usage_mask = mask
                        previous.meta = meta
                        previous.usage = usage
                    if not coalesce:
                        append(UsageUpdate(usage=usage, extra=extra))
                    continue
                # (The chunk's location, for what may go wrong from here; for the
                # chunks made inline, only the last one's is set, at the end.)
                self.frame_index = count - 1
                self.frame_offset = base + taken
                general += 1
                try:
                    if not self._matched(template, text, meta, out):
                        # The state changed since the template was learned: the
                        # general way, with what the parser would give.
                        whole = data[taken : end + suf_size]
                        if sse is not None:
                            self._chunk(whole[6:].decode("utf-8", "replace"), out)
                        else:
                            self._chunk(whole, out)
                except RemoteProtocolError as exc:
                    self._tolerate(exc, out)
        finally:
            if usages:
                self._settle(template, usages)
            if run_extra is not None:
                self._coalesced(run, run_index, run_extra, out)
                if not join:
                    self._runs.append(
                        UsageRun(
                            len(out) - 1,
                            count - counted - general,
                            UsageTexts(chunk_usages, chunk_ones, self._usage_text_update)
                            if keep_texts
                            else None,
                        )
                    )
            if count > counted:
                self.frame_index = count - 1
                self.frame_offset = base + taken
            if pos > first:
                if sse is not None:
                    sse.skip(pos - first, count - counted)
                    self._scan_offset += pos - first
                else:
                    assert array is not None
                    array.skip(pos - first, count - counted, comma=comma)
        return pos

    def _usage_text_update(self, text: bytes, extra: dict[str, Any] | None) -> UsageUpdate:
        """The usage update a chunk read inline gives for its ``usageMetadata`` text
        (what a kept usage text stands for, see :class:`UsageTexts`): the text
        converted, with the chunk's ``extra``."""
        return UsageUpdate(usage=convert_usage(OBJECT_DECODER.decode(text))[0], extra=extra)

    def _settle(self, template: Template, usages: list[bytes]) -> None:
        """Read the usage texts of chunks read inline and coalesced, all of one
        shape (see :func:`usage_shape`) and checked: merged, they give what the last
        one gives, unless that one reports no count (then each is read, in order)."""
        last = usages[-1]
        meta = OBJECT_DECODER.decode(last)
        usage, mask = convert_usage(meta)
        if not mask:
            for text in usages[:-1]:
                self._new_usage(OBJECT_DECODER.decode(text))
        self._merge_usage(meta, usage, mask)
        template.block_usage = last
        template.block_usage_size = len(last)
        template.block_meta = meta

    def _coalesced(
        self, texts: list[str], index: int, extra: dict[str, Any] | None, out: list[Event]
    ) -> None:
        """The events of a run of chunks read inline and coalesced (see
        :data:`~polystream.dialects._base.Coalesce`): with ``"result"``, one TextDelta
        of their texts joined, and one UsageUpdate of the usage merged so far (every
        count of the stream: an accumulator's usage after it is the one it would have
        after each chunk's own); with ``"usage"`` (no ``texts``: each was given as its
        chunk was read), only the UsageUpdate."""
        if texts:
            joined = texts[0] if len(texts) == 1 else "".join(texts)
            out.append(TextDelta(index=index, delta=joined))
        out.append(UsageUpdate(usage=self._merged_usage(), extra=extra))

    def _matched(
        self, template: Template, text: str, meta: dict[str, Any], out: list[Event]
    ) -> bool:
        """:meth:`_usual_chunk` for a chunk that fits ``template`` (its text and
        usageMetadata given); False, having done nothing, when the chunk before did
        not have the same modelVersion and responseId."""
        previous = self._previous
        extra = previous.extra
        verified = True
        if extra is None or extra is not template.extra:
            verified = False
            residual = previous.residual
            if not (
                residual is not None
                and len(residual) == 2
                and residual.get("modelVersion") == template.model
                and residual.get("responseId") == template.rid
            ):
                return False
            candidates = previous.candidates
            if (
                extra is not None
                and residual is previous.extra_residual
                and candidates is previous.extra_candidates
                and candidates is not None
                and len(candidates) == 1
                and candidates[0] is self._index_residuals.get(template.index)
            ):
                # The chunk before ended with the extra this chunk's UsageUpdate has.
                # Until previous.extra changes, so do not the residual and candidates
                # it was built from (they are only ever replaced along with it).
                template.extra = extra
                verified = True
        state = template.state
        if state is None:
            state = template.state = self._state(template.index)
        index = state.open
        if index is not None and state.open_kind == "text":
            out.append(TextDelta(index=index, delta=text))
        else:
            self._part({"text": text}, template.index, state, out)
        if not verified:
            residual = previous.residual
            assert residual is not None
            self._usual_end(template.index, meta, residual, out)
            return True
        # _usual_end, for its usual case: the chunk fields and the candidate's residual
        # are those of the chunk before, and so is the extra.
        usage = previous.usage
        if usage is None or meta is not previous.meta:
            # A usage text other than the last one's (the same text gives the same
            # object, see match_template); an equal value converts to an equal usage.
            usage = self._new_usage(meta)
        out.append(UsageUpdate(usage=usage, extra=extra))
        return True

    def _learn(self, data: str | bytes, chunk: dict[str, Any]) -> None:
        """After a usual chunk with one text part, find the template it fits (unless
        the template in use already holds its index, modelVersion and responseId)."""
        candidate = chunk["candidates"][0]
        number = candidate["index"]
        model = chunk["modelVersion"]
        rid = chunk["responseId"]
        template = self._template
        if (
            template is not None
            and template.index == number
            and template.model == model
            and template.rid == rid
        ):
            return
        parts = candidate["content"]["parts"]
        if len(parts) != 1 or type(parts[0]) is not dict or len(parts[0]) != 1:
            return
        text = parts[0].get("text")
        if type(text) is not str:
            return
        for pre, mid, suf in templates_for(number, model, rid):
            if isinstance(data, str):
                template = Template(pre.decode(), mid.decode(), suf.decode(), number, model, rid)
                if not any(c in piece for piece in (pre, mid, suf) for c in (b"\r", b"\n")):
                    template.block = Layout.of(b"data: " + pre, mid, suf, (b"\r\n\r\n", b"\n\n"))
            else:
                template = Template(pre, mid, suf, number, model, rid)
                if b"\n" in mid:  # pretty-printed: Google's array layout
                    template.block = Layout.of(pre, mid, suf, (b"\r\n,\r\n", b"\n,\n"))
            if template.block is not None:
                ending, size = template.block.ends[0]
                template.block_tail = (suf + ending, len(suf) + size)
            found = match_template(template, data)
            if found is not None:
                if found[0] == text and found[1] == chunk["usageMetadata"]:
                    self._template = template
                    return
                break  # cannot happen (see Template); never use it then
        self._template_tries -= 1
