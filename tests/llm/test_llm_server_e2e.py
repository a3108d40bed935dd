"""The OpenAI-compatible client end to end: a small server on 127.0.0.1 answers from the real model.

The server speaks the same wire protocol as llama-server/vLLM (``/v1/models``, streamed
``/v1/chat/completions`` and ``/v1/completions`` as server-sent events with a final ``usage`` chunk),
so the client's HTTP, SSE parsing, counting and cancellation run for real.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kforge_desktop.llm.generator import GenerationRequest, Message
from kforge_desktop.llm.llama_backend import LlamaCppGenerator
from kforge_desktop.llm.server_backend import OpenAIServerGenerator

pytestmark = pytest.mark.llm


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    model: LlamaCppGenerator
    disconnects: list[int]

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def _json(self, obj: dict, status: int = 200) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if self.path == "/v1/models":
            self._json({"object": "list", "data": [{"id": "local-qwen", "object": "model"}]})
        else:
            self._json({"error": {"message": "not found"}}, 404)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        chat = self.path == "/v1/chat/completions"
        if not chat and self.path != "/v1/completions":
            self._json({"error": {"message": "not found"}}, 404)
            return
        request = GenerationRequest(
            messages=tuple(Message(m["role"], m["content"]) for m in body.get("messages", [])),
            prompt=None if chat else body["prompt"],
            max_tokens=body["max_tokens"], temperature=body["temperature"], top_p=body["top_p"],
            seed=body.get("seed"), stop=tuple(body.get("stop") or ()), grammar=body.get("grammar"),
        )
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        cancel = threading.Event()
        sent = [0]

        def send(obj: dict | str) -> None:
            data = obj if isinstance(obj, str) else json.dumps(obj)
            self.wfile.write(f"data: {data}\n\n".encode())
            self.wfile.flush()

        def on_token(piece: str) -> None:
            if cancel.is_set():
                return
            choice = {"index": 0, "delta": {"content": piece}} if chat else {"index": 0, "text": piece}
            try:
                send({"choices": [choice]})
                sent[0] += 1
            except OSError:  # the client hung up: stop generating, as real servers do
                cancel.set()

        out = self.model.generate(request, on_token=on_token, cancel=cancel)
        if cancel.is_set():
            self.disconnects.append(sent[0])
            return
        last = {"index": 0, "finish_reason": out.finish_reason}
        last.update({"delta": {}} if chat else {"text": ""})
        send({"choices": [last]})
        send({"choices": [], "usage": {"prompt_tokens": out.prompt_tokens,
                                       "completion_tokens": out.completion_tokens}})
        send("[DONE]")
        self.close_connection = True


@pytest.fixture(scope="module")
def server(test_model_path):
    model = LlamaCppGenerator(test_model_path, n_ctx=2048)
    handler = type("Handler", (_Handler,), {"model": model, "disconnects": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", model, handler
    httpd.shutdown()
    model.close()


def test_chat_streams_with_usage_counts(server):
    url, model, _ = server
    client = OpenAIServerGenerator(url)
    assert client.name == "local-qwen"
    pieces: list[str] = []
    req = GenerationRequest.chat("Write a C++ function that adds two ints.", max_tokens=20, temperature=0)
    out = client.generate(req, on_token=pieces.append)
    direct = model.generate(req)
    assert out.text == direct.text  # the same answer as in-process, through HTTP and SSE
    assert "".join(pieces) == out.text and len(pieces) > 3
    assert (out.prompt_tokens, out.completion_tokens) == (direct.prompt_tokens, direct.completion_tokens)
    assert out.finish_reason == direct.finish_reason and not out.cancelled


def test_raw_completion_and_base_url_with_v1(server):
    url, _, _ = server
    client = OpenAIServerGenerator(url + "/v1/", model="chosen-name")
    out = client.generate(GenerationRequest(prompt="def add(a, b):\n    return", max_tokens=5, temperature=0))
    assert out.text and out.completion_tokens <= 5 and out.model == "chosen-name"


def test_stop_strings_pass_through(server):
    url, _, _ = server
    out = OpenAIServerGenerator(url).generate(
        GenerationRequest.chat("Count from 1 to 20, separated by commas.", max_tokens=60, temperature=0, stop=("7",)))
    assert "7" not in out.text and "6" in out.text and out.finish_reason == "stop"


def test_cancel_closes_the_stream_and_the_server_stops(server):
    url, _, handler = server
    client = OpenAIServerGenerator(url)
    cancel = threading.Event()
    seen: list[str] = []

    def on_token(piece: str) -> None:
        seen.append(piece)
        if len(seen) == 3:
            cancel.set()

    before = len(handler.disconnects)
    out = client.generate(GenerationRequest.chat("Explain GPU tiling at length.", max_tokens=200, temperature=0),
                          on_token=on_token, cancel=cancel)
    assert out.cancelled and out.finish_reason == "cancelled" and len(seen) == 3
    deadline = time.monotonic() + 20
    while len(handler.disconnects) == before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert len(handler.disconnects) == before + 1
    assert handler.disconnects[-1] < 100  # the server noticed and stopped well before 200 tokens
