"""A scripted fake model on 127.0.0.1 for the real agent binaries.

It speaks just enough of two wire protocols for Claude Code and Codex to run a session:

- the Anthropic Messages API (`POST /v1/messages`, SSE when `stream` is true, plus
  `/v1/messages/count_tokens`) for Claude Code (`ANTHROPIC_BASE_URL`);
- the OpenAI Responses API (`POST …/responses`, SSE) for Codex (a `model_providers`
  entry with `wire_api = "responses"`);
- Google's Gemini API (`POST /v1beta/models/<model>:streamGenerateContent?alt=sse`,
  `:generateContent`, `:countTokens`) for Gemini CLI (`GOOGLE_GEMINI_BASE_URL`).

A script is a list of turns. Every request that offers the agent's working tools (a
"main" request: Claude Code's `Bash`, Codex's `exec_command`) takes the next turn; side
requests (titles, quota probes, summaries) get a short text and take none. A turn is a
`Tool` call, a final `Text`, or a callable that looks at the request and returns one of
those (so a turn can answer what the agent just said). When the script runs out, every
main request gets `Text("done")`. Every request body is recorded for the tests.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Body = dict[str, Any]


@dataclass(frozen=True)
class Tool:
    """A tool call. `name` is matched against the tool names the request advertises
    (first exact, then case-insensitive), so a script can say `Tool("Task", …)` and get
    whichever of `Task`/`Agent` the binary offers. Codex: `exec_command` arguments are
    JSON; `apply_patch` is a freeform (custom) tool whose input is the patch text."""

    name: str
    input: dict[str, Any] | str
    aliases: tuple[str, ...] = ()


@dataclass(frozen=True)
class Text:
    text: str


Reply = Tool | Text
Turn = Reply | Callable[[Body], Reply]


@dataclass
class Request:
    path: str
    body: Body
    main: bool
    reply: Reply | None = None

    @property
    def text(self) -> str:
        """The whole body as JSON text, for `in` checks."""
        return json.dumps(self.body, ensure_ascii=False)

    @property
    def conversation(self) -> str:
        """What the agent sent as the conversation (Anthropic `system` + `messages`,
        Responses `instructions` + `input`) as JSON text: the tool list left out, since
        it names tma1's MCP tools in every request."""
        keys = ("system", "messages", "instructions", "input", "systemInstruction", "contents")
        return json.dumps([self.body.get(k) for k in keys], ensure_ascii=False)


def tool_names(body: Body) -> list[str]:
    """The names of the tools a request offers (Anthropic and Responses shapes; Codex's
    namespaced MCP tools are listed as `namespace.name` too)."""
    names: list[str] = []
    for t in body.get("tools") or ():
        if not isinstance(t, dict):
            continue
        name = t.get("name")
        if isinstance(name, str):
            names.append(name)
        fn = t.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            names.append(fn["name"])
        for sub in t.get("tools") or ():  # a namespace of tools
            if isinstance(sub, dict) and isinstance(sub.get("name"), str):
                names.append(f"{name}.{sub['name']}")
        for decl in t.get("functionDeclarations") or ():  # Gemini
            if isinstance(decl, dict) and isinstance(decl.get("name"), str):
                names.append(decl["name"])
    return names


MAIN_TOOLS = ("Bash", "bash", "exec_command", "shell", "shell_command", "run_shell_command")


@dataclass
class FakeModel:
    script: list[Turn] = field(default_factory=list)
    requests: list[Request] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _server: ThreadingHTTPServer | None = field(default=None, repr=False)
    _thread: threading.Thread | None = field(default=None, repr=False)
    _ids: Iterator[int] = field(default_factory=lambda: itertools.count(1), repr=False)

    # -- life cycle ---------------------------------------------------------------
    def start(self) -> FakeModel:
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                # Model lists and the like: an empty list is enough for both agents.
                model._send_json(self, 200, {"data": [], "models": [], "object": "list"})

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else self._read_chunked()
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                model._handle(self, self.path, body if isinstance(body, dict) else {})

            def _read_chunked(self) -> bytes:
                if "chunked" not in (self.headers.get("Transfer-Encoding") or ""):
                    return b""
                out = b""
                while True:
                    size = int(self.rfile.readline().strip() or b"0", 16)
                    if size == 0:
                        self.rfile.readline()
                        return out
                    out += self.rfile.read(size)
                    self.rfile.readline()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FakeModel:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- what the tests read ----------------------------------------------------
    def main_requests(self) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.main]

    def all_text(self) -> str:
        with self._lock:
            return "\n".join(r.text for r in self.requests)

    def remaining(self) -> int:
        with self._lock:
            return len(self.script)

    # -- the protocol -------------------------------------------------------------
    def _next_reply(self, path: str, body: Body) -> tuple[Request, Reply]:
        names = tool_names(body)
        main = any(n in names for n in MAIN_TOOLS)
        turn: Turn
        with self._lock:
            req = Request(path=path, body=body, main=main)
            self.requests.append(req)
            if not main:
                turn = Text("ok")
            elif self.script:
                turn = self.script.pop(0)
            else:
                turn = Text("done")
        # A callable turn runs outside the lock: it may wait for another request's turn.
        reply = turn if isinstance(turn, Tool | Text) else turn(body)
        with self._lock:
            req.reply = reply
        return req, reply

    def _handle(self, h: BaseHTTPRequestHandler, path: str, body: Body) -> None:
        route = path.split("?", 1)[0]
        if route.endswith("/count_tokens"):
            self._send_json(h, 200, {"input_tokens": 100})
        elif route.endswith("/messages"):
            _, reply = self._next_reply(route, body)
            self._anthropic(h, body, reply)
        elif route.endswith("/responses"):
            _, reply = self._next_reply(route, body)
            self._responses(h, body, reply)
        elif route.endswith(":countTokens"):
            self._send_json(h, 200, {"totalTokens": 100})
        elif route.endswith(":generateContent") or route.endswith(":streamGenerateContent"):
            # Gemini's body has no `tools` key on side requests; `request` wraps it when
            # the CLI talks to Code Assist (not used here).
            _, reply = self._next_reply(route, body)
            self._gemini(h, body, reply, stream=route.endswith(":streamGenerateContent"))
        else:
            with self._lock:
                self.requests.append(Request(path=route, body=body, main=False))
            self._send_json(h, 404, {"error": {"message": f"no route {route}"}})

    def _resolve(self, reply: Tool, body: Body) -> str:
        names = tool_names(body)
        for want in (reply.name, *reply.aliases):
            if want in names:
                return want
        for want in (reply.name, *reply.aliases):
            for n in names:
                if n.lower() == want.lower():
                    return n
        raise AssertionError(f"the request offers no tool {reply.name!r}: {names}")

    @staticmethod
    def _send_json(h: BaseHTTPRequestHandler, status: int, doc: Any) -> None:
        data = json.dumps(doc).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    @staticmethod
    def _send_sse(h: BaseHTTPRequestHandler, events: list[tuple[str, Body]]) -> None:
        data = b"".join(
            f"event: {name}\ndata: {json.dumps(doc)}\n\n".encode() for name, doc in events
        )
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    # Anthropic Messages ------------------------------------------------------------
    def _anthropic(self, h: BaseHTTPRequestHandler, body: Body, reply: Reply) -> None:
        n = next(self._ids)
        model = body.get("model") or "claude-fake"
        usage = {"input_tokens": 100, "output_tokens": 10}
        if isinstance(reply, Tool):
            block: Body = {
                "type": "tool_use",
                "id": f"toolu_fake{n:04d}",
                "name": self._resolve(reply, body),
                "input": reply.input,
            }
            stop = "tool_use"
        else:
            block = {"type": "text", "text": reply.text}
            stop = "end_turn"
        message = {
            "id": f"msg_fake{n:04d}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [block],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": usage,
        }
        if not body.get("stream"):
            self._send_json(h, 200, message)
            return
        start_block = (
            {**block, "input": {}} if block["type"] == "tool_use" else {"type": "text", "text": ""}
        )
        delta = (
            {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
            if block["type"] == "tool_use"
            else {"type": "text_delta", "text": block["text"]}
        )
        self._send_sse(
            h,
            [
                (
                    "message_start",
                    {
                        "type": "message_start",
                        "message": {**message, "content": [], "stop_reason": None},
                    },
                ),
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": 0, "content_block": start_block},
                ),
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": 0, "delta": delta},
                ),
                ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                (
                    "message_delta",
                    {
                        "type": "message_delta",
                        "delta": {"stop_reason": stop, "stop_sequence": None},
                        "usage": {"output_tokens": 10},
                    },
                ),
                ("message_stop", {"type": "message_stop"}),
            ],
        )

    # OpenAI Responses --------------------------------------------------------------
    def _responses(self, h: BaseHTTPRequestHandler, body: Body, reply: Reply) -> None:
        n = next(self._ids)
        rid = f"resp_fake{n:04d}"
        item: Body
        if isinstance(reply, Tool):
            name = self._resolve(reply, body)
            call_id = f"call_fake{n:04d}"
            if isinstance(reply.input, str):
                item = {
                    "type": "custom_tool_call",
                    "id": f"ctc_fake{n:04d}",
                    "status": "completed",
                    "call_id": call_id,
                    "name": name,
                    "input": reply.input,
                }
            else:
                item = {
                    "type": "function_call",
                    "id": f"fc_fake{n:04d}",
                    "status": "completed",
                    "call_id": call_id,
                    "name": name,
                    "arguments": json.dumps(reply.input),
                }
        else:
            item = {
                "type": "message",
                "id": f"msg_fake{n:04d}",
                "status": "completed",
                "role": "assistant",
                "content": [{"type": "output_text", "text": reply.text, "annotations": []}],
            }
        usage = {
            "input_tokens": 100,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 10,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 110,
        }
        response = {"id": rid, "object": "response", "status": "completed", "output": [item]}
        self._send_sse(
            h,
            [
                ("response.created", {"type": "response.created", "response": {"id": rid}}),
                (
                    "response.output_item.done",
                    {"type": "response.output_item.done", "output_index": 0, "item": item},
                ),
                (
                    "response.completed",
                    {"type": "response.completed", "response": {**response, "usage": usage}},
                ),
            ],
        )

    # Google Gemini ------------------------------------------------------------------
    def _gemini(self, h: BaseHTTPRequestHandler, body: Body, reply: Reply, *, stream: bool) -> None:
        part: Body
        if isinstance(reply, Tool):
            assert isinstance(reply.input, dict)
            part = {"functionCall": {"name": self._resolve(reply, body), "args": reply.input}}
        else:
            part = {"text": reply.text}
        doc = {
            "candidates": [
                {
                    "content": {"role": "model", "parts": [part]},
                    "finishReason": "STOP",
                    "index": 0,
                }
            ],
            "usageMetadata": {
                "promptTokenCount": 100,
                "candidatesTokenCount": 10,
                "totalTokenCount": 110,
            },
            "modelVersion": "gemini-fake",
        }
        if not stream:
            self._send_json(h, 200, doc)
            return
        data = f"data: {json.dumps(doc)}\r\n\r\n".encode()
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)
