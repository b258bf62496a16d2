"""The least a streaming gateway in Python does: the gateway's near-limit baseline.

``python -m benchmarks._minimal LISTEN_PORT UPSTREAM_PORT`` serves the benchmark's three
routes (:data:`benchmarks.gateway.ROUTES`) the way the smallest useful gateway would, as
the minimal loop is to the decoders: it parses each HTTP/1.1 request, routes it by its
model (``bench-chat``: the emulator's Chat endpoint, ``bench-claude``: its Anthropic
Messages endpoint, the model rewritten as the gateway's configuration does), sends it
upstream on a kept-alive connection, and passes every upstream event on as it comes:
the chunked body unframed, the SSE events split, each event's JSON decoded and encoded
again (``msgspec``), in the client's dialect (Anthropic Messages events become Chat
chunks for a Chat client: a role chunk, one chunk per text delta, the finish reason and
usage, ``[DONE]``), and written to the client as one chunk per upstream read.

Everything runs in the protocols' callbacks (no task, no future, no generator between a
read and its write), on asyncio's default loop; its connections are the byte relay's
(:mod:`benchmarks._relay`: the same socket options, one kept-alive upstream connection
per client connection), with the HTTP and the events on top.
It has none of the rest of a gateway: no validation, errors, retries, timeouts, journal,
resume, keep-alive comments, limits or other events. What it adds over the byte relay
(:mod:`benchmarks._relay`) is what understanding the streams costs at the least; the
gateway over it is what the rest costs.
"""

from __future__ import annotations

import sys
from typing import Any

import msgspec

from benchmarks import _relay
from benchmarks.gateway import CHAT_MODEL, CLAUDE_MODEL

_MODELS = {"bench-chat": CHAT_MODEL, "bench-claude": CLAUDE_MODEL}
_CHAT_PATH = b"/openai/v1/chat/completions"
_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)
_FINISH = {
    "end_turn": "stop",
    "max_tokens": "length",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
}

_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode


class _Upstream(_relay._Upstream):
    """The kept-alive connection to the emulator: parses its replies (status line and
    headers, chunked framing, SSE events) and hands each read's events to the client."""

    def __init__(self, client: _Client) -> None:
        super().__init__(client)
        self.client = client
        self.buffer = b""
        self.in_head = True
        self.chunk_left = -1  # bytes of the current chunk still to come (-1: a size line)
        self.sse = b""

    def data_received(self, data: bytes) -> None:
        self._ack()
        self.buffer = self.buffer + data if self.buffer else data
        ended = self._parse()
        while ended and self.buffer:  # bytes of the next reply came with this one's end
            ended = self._parse()

    def _parse(self) -> bool:
        """Pass on what the buffer completes of the current reply; True when it ended."""
        buffer = self.buffer
        if self.in_head:
            end = buffer.find(b"\r\n\r\n")
            if end < 0:
                return False
            status = int(buffer[9:12])
            if status != 200:
                raise RuntimeError(f"upstream status {status}")
            self.in_head = False
            buffer = buffer[end + 4 :]
        # The chunked body: what this read completes of it, unframed.
        body: list[bytes] = []
        done = False
        while buffer:
            if self.chunk_left < 0:
                line = buffer.find(b"\r\n")
                if line < 0:
                    break
                size = int(buffer[:line].split(b";")[0], 16)
                if size == 0:
                    if len(buffer) < line + 4:
                        break  # the terminator's last CRLF is still to come
                    buffer = buffer[line + 4 :]
                    done = True
                    break
                self.chunk_left = size
                buffer = buffer[line + 2 :]
            if self.chunk_left > 0:
                piece = buffer[: self.chunk_left]
                body.append(piece)
                self.chunk_left -= len(piece)
                buffer = buffer[len(piece) :]
            if self.chunk_left == 0:
                if len(buffer) < 2:
                    break
                buffer = buffer[2:]
                self.chunk_left = -1
        self.buffer = buffer
        sse = self.sse + b"".join(body)
        cut = sse.rfind(b"\n\n")
        if cut >= 0:
            self.sse = sse[cut + 2 :]
            self.client.events(sse[:cut].split(b"\n\n"))
        else:
            self.sse = sse
        if not done:
            return False
        self.in_head = True
        self.client.end()
        return True


class _Client(_relay._Downstream):
    """A client's connection: its requests (one at a time, kept alive) go upstream."""

    upstream_class = _Upstream

    def __init__(self, upstream_port: int) -> None:
        super().__init__(upstream_port)
        self.buffer = b""
        self.transcode = False
        self.started = False
        self.usage: Any = None
        self.chat_id = ""
        self.created = 0

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer + data
        end = buffer.find(b"\r\n\r\n")
        if end < 0:
            self.buffer = buffer
            return
        head = buffer[:end]
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        if len(buffer) < end + 4 + length:
            self.buffer = buffer
            return
        self.buffer = buffer[end + 4 + length :]
        self._request(head.split(b" ", 2)[1], buffer[end + 4 : end + 4 + length])

    def _request(self, path: bytes, body: bytes) -> None:
        payload = _decode(body)
        model = payload["model"]
        payload["model"] = _MODELS[model]
        if model == "bench-claude":
            upstream_path = b"/anthropic/v1/messages"
            self.transcode = path == _CHAT_PATH
            if self.transcode:
                payload.setdefault("max_tokens", 4096)
        else:
            upstream_path = _CHAT_PATH
            self.transcode = False
        self.started = False
        data = _encode(payload)
        request = (
            b"POST %s HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            b"accept: text/event-stream\r\nauthorization: Bearer x\r\nx-api-key: x\r\n"
            b"anthropic-version: 2023-06-01\r\ncontent-length: %d\r\n\r\n%s"
        ) % (upstream_path, len(data), data)
        upstream = self.upstream
        if upstream is None or upstream.transport is None:
            self.waiting.append(request)
        else:
            upstream.transport.write(request)

    def events(self, events: list[bytes]) -> None:
        """One upstream read's SSE events: decoded, encoded again, written as one chunk."""
        out: list[bytes] = []
        for event in events:
            name = b""
            data = b""
            for line in event.split(b"\n"):
                if line.startswith(b"data: "):
                    data = line[6:]
                elif line.startswith(b"event: "):
                    name = line[7:]
            if not data:
                continue
            if data == b"[DONE]":
                out.append(b"data: [DONE]\n\n")
                continue
            value = _decode(data)
            if not self.transcode:
                encoded = _encode(value)
                if name:
                    out.append(b"event: %s\ndata: %s\n\n" % (name, encoded))
                else:
                    out.append(b"data: %s\n\n" % encoded)
                continue
            chunk = self._chat_chunk(value)
            if chunk is not None:
                out.append(b"data: %s\n\n" % _encode(chunk))
            if value["type"] == "message_stop":
                out.append(b"data: [DONE]\n\n")
        if out:
            self._write(b"".join(out))

    def _chat_chunk(self, event: dict[str, Any]) -> dict[str, Any] | None:
        """The Chat chunk an Anthropic Messages event becomes (None: none)."""
        kind = event["type"]
        delta: dict[str, Any]
        finish = None
        usage = None
        if kind == "message_start":
            message = event["message"]
            self.chat_id = "chatcmpl-" + message["id"]
            self.usage = message["usage"]
            delta = {"role": "assistant", "content": ""}
        elif kind == "content_block_delta" and event["delta"]["type"] == "text_delta":
            delta = {"content": event["delta"]["text"]}
        elif kind == "message_delta":
            delta = {}
            finish = _FINISH.get(event["delta"]["stop_reason"], "stop")
            prompt = self.usage["input_tokens"] if self.usage else 0
            completion = event["usage"]["output_tokens"]
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            }
        else:
            return None
        chunk = {
            "id": self.chat_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": "bench-claude",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        if usage is not None:
            chunk["usage"] = usage
        return chunk

    def _write(self, data: bytes) -> None:
        transport = self.transport
        if transport is None:
            return
        frame = b"%x\r\n%s\r\n" % (len(data), data)
        if not self.started:
            self.started = True
            frame = _HEAD + frame
        transport.write(frame)

    def end(self) -> None:
        """The upstream reply ended: so does the client's."""
        if self.transport is not None:
            self.transport.write(b"0\r\n\r\n" if self.started else _HEAD + b"0\r\n\r\n")


def main(argv: list[str]) -> int:
    return _relay.main(argv, _Client, "benchmarks._minimal")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
