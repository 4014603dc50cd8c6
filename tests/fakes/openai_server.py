"""A real local HTTP server speaking the OpenAI chat-completions protocol, scripted per test.

The openai SDK 3.x talks through httpx2, which respx cannot intercept, so the provider is tested
end to end against this server on 127.0.0.1 (an ephemeral port, in a thread of the test process).

    server.reply_json({"product": ...})      # a good structured answer (dict -> JSON text)
    server.reply_content("{not json")        # any content string (malformed JSON, prose, ...)
    server.reply_status(429)                 # an HTTP error with an OpenAI-style error body
    server.reply_slow(5.0, content)          # answers after a delay (beyond the client timeout)

Each POST /v1/chat/completions consumes the next scripted reply, in order; with none left the
server answers 500 "no scripted reply", so a test that makes an unexpected call fails loudly.
`server.requests` records every request received (path, headers, parsed JSON body).
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # names lower-cased
    body: dict[str, Any] | None

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list((self.body or {}).get("messages") or [])


@dataclass
class ScriptedReply:
    status: int = 200
    content: str | None = None
    delay: float = 0.0
    usage: tuple[int, int] | None = (0, 0)
    headers: dict[str, str] = field(default_factory=dict)
    error: dict[str, Any] | None = None
    model: str = "fake-model"
    finish_reason: str = "stop"


class FakeOpenAIServer:
    def __init__(self) -> None:
        self.requests: list[RecordedRequest] = []
        self._script: deque[ScriptedReply] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._counter = 0
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-openai", daemon=True)

    # --- lifecycle ---------------------------------------------------------------------------
    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()  # releases any reply still sleeping in reply_slow
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- scripting ---------------------------------------------------------------------------
    def reply_content(self, content: str, *, usage: tuple[int, int] | None = None, delay: float = 0.0,
                      finish_reason: str = "stop") -> None:
        if usage is None:
            usage = (0, 0)  # 0 means: compute a plausible count when answering
        self._push(ScriptedReply(content=content, usage=usage, delay=delay, finish_reason=finish_reason))

    def reply_json(self, payload: Any, *, usage: tuple[int, int] | None = None) -> None:
        self.reply_content(json.dumps(payload), usage=usage)

    def reply_without_usage(self, payload: Any) -> None:
        self._push(ScriptedReply(content=json.dumps(payload), usage=None))

    def reply_slow(self, delay: float, content: str = "{}") -> None:
        self.reply_content(content, delay=delay)

    def reply_status(self, status: int, message: str | None = None, *, headers: dict[str, str] | None = None) -> None:
        error_type = {400: "invalid_request_error", 401: "authentication_error", 404: "not_found_error",
                      429: "rate_limit_error"}.get(status, "server_error")
        self._push(ScriptedReply(status=status, headers=headers or {},
                                 error={"message": message or f"fake server: HTTP {status}", "type": error_type,
                                        "param": None, "code": None}))

    def _push(self, reply: ScriptedReply) -> None:
        with self._lock:
            self._script.append(reply)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._script)

    # --- answering ---------------------------------------------------------------------------
    def _next(self) -> ScriptedReply | None:
        with self._lock:
            self._counter += 1
            return self._script.popleft() if self._script else None

    def _completion(self, reply: ScriptedReply, body: dict) -> dict:
        prompt, completion = reply.usage or (0, 0)
        if reply.usage is not None and prompt == 0:
            prompt = sum(len(str(m.get("content", ""))) // 4 + 4 for m in body.get("messages") or [])
        if reply.usage is not None and completion == 0:
            completion = max(1, len(reply.content or "") // 4)
        answer = {
            "id": f"chatcmpl-fake-{self._counter}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.model,
            "choices": [{"index": 0, "finish_reason": reply.finish_reason, "logprobs": None,
                         "message": {"role": "assistant", "content": reply.content, "refusal": None}}],
        }
        if reply.usage is not None:
            answer["usage"] = {"prompt_tokens": prompt, "completion_tokens": completion,
                               "total_tokens": prompt + completion}
        return answer

    def _handler_class(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format, *args):  # keep test output clean
                pass

            def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in (headers or {}).items():
                        self.send_header(name, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout): nothing to answer

            def do_POST(self):  # noqa: N802 - http.server's naming
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"null")
                except ValueError:
                    body = None
                server.requests.append(RecordedRequest("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                if self.path.rstrip("/") != "/v1/chat/completions":
                    self._send(404, {"error": {"message": f"fake server: no route {self.path}",
                                               "type": "not_found_error"}})
                    return
                reply = server._next()
                if reply is None:
                    self._send(500, {"error": {"message": "fake server: no scripted reply left",
                                               "type": "server_error"}})
                    return
                if reply.delay and server._stopping.wait(reply.delay):
                    return
                if reply.status != 200:
                    self._send(reply.status, {"error": reply.error}, reply.headers)
                    return
                self._send(200, server._completion(reply, body or {}), reply.headers)

        return Handler
