"""The server backend's promises that need no model: loopback only, clear errors, SSE edge cases."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kforge_desktop.llm.generator import GenerationError, GenerationRequest
from kforge_desktop.llm.server_backend import (
    OpenAIServerGenerator,
    check_url,
    estimate_tokens,
    is_loopback_host,
)


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "127.8.9.10", "::1", "[::1]", "LOCALHOST"])
def test_loopback_hosts_are_accepted(host):
    assert is_loopback_host(host)


@pytest.mark.parametrize("url", ["http://10.0.0.5:8000", "http://example.com/v1", "https://api.openai.com/v1",
                                 "http://0.0.0.0:8080", "http://192.168.1.2", "http://localhost.evil.com:80"])
def test_remote_hosts_are_refused_with_the_reason(url):
    with pytest.raises(GenerationError) as err:
        OpenAIServerGenerator(url)
    msg = str(err.value)
    assert msg.startswith("refusing to send prompts") and "offline" in msg and "\n" not in msg


def test_remote_host_allowed_only_when_asked():
    assert check_url("http://10.0.0.5:8000", allow_remote=True).hostname == "10.0.0.5"


def test_not_a_url():
    with pytest.raises(GenerationError, match="not an http"):
        OpenAIServerGenerator("ftp://127.0.0.1/x")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_nothing_listening_is_one_sentence():
    with pytest.raises(GenerationError) as err:
        OpenAIServerGenerator(f"http://127.0.0.1:{_free_port()}", timeout=5)
    assert "cannot reach the model server" in str(err.value) and "is it running" in str(err.value)


class _Canned(BaseHTTPRequestHandler):
    """Serves fixed answers (set per test) so the client's protocol handling can be checked exactly."""

    routes: dict[str, tuple[int, str, bytes]] = {}
    seen: list[dict] = []

    def log_message(self, *args) -> None:
        pass

    def _reply(self) -> None:
        status, ctype, body = self.routes.get(self.path, (404, "application/json", b'{"error": "no"}'))
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        self._reply()

    def do_POST(self) -> None:
        self.seen.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self._reply()


@pytest.fixture()
def canned():
    handler = type("H", (_Canned,), {"routes": {}, "seen": []})
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", handler
    httpd.shutdown()


def _sse(*events: object) -> bytes:
    return b"".join(f"data: {e if isinstance(e, str) else json.dumps(e)}\n\n".encode() for e in events)


def test_stream_without_usage_counts_chunks_and_estimates_the_prompt(canned, monkeypatch):
    url, h = canned
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")  # must be ignored for a loopback server
    h.routes["/v1/chat/completions"] = (200, "text/event-stream", _sse(
        {"choices": [{"delta": {"role": "assistant"}}]},
        {"choices": [{"delta": {"content": "int "}}]},
        {"choices": [{"delta": {"content": "x;"}, "finish_reason": "stop"}]},
        "[DONE]",
    ))
    client = OpenAIServerGenerator(url, model="m")
    pieces: list[str] = []
    out = client.generate(GenerationRequest.chat("hello there", max_tokens=9, seed=3, stop=("END",),
                                                 grammar='root ::= "x"'), on_token=pieces.append)
    assert out.text == "int x;" and "".join(pieces) == out.text
    assert out.completion_tokens == 2 and out.prompt_tokens == estimate_tokens("hello there") + 4
    assert out.finish_reason == "stop"
    sent = h.seen[-1]
    assert sent["stream"] is True and sent["max_tokens"] == 9 and sent["seed"] == 3
    assert sent["stop"] == ["END"] and sent["grammar"] == 'root ::= "x"' and sent["model"] == "m"
    assert sent["messages"] == [{"role": "user", "content": "hello there"}]


def test_http_error_carries_the_server_message(canned):
    url, h = canned
    h.routes["/v1/chat/completions"] = (400, "application/json",
                                        b'{"error": {"message": "the request exceeds the context size"}}')
    with pytest.raises(GenerationError) as err:
        OpenAIServerGenerator(url, model="m").generate(GenerationRequest.chat("x"))
    assert "answered 400" in str(err.value) and "exceeds the context size" in str(err.value)


def test_error_event_in_the_stream(canned):
    url, h = canned
    h.routes["/v1/chat/completions"] = (200, "text/event-stream", _sse({"error": {"message": "model crashed"}}))
    with pytest.raises(GenerationError, match="model crashed"):
        OpenAIServerGenerator(url, model="m").generate(GenerationRequest.chat("x"))


def test_non_streaming_json_answer_is_accepted(canned):
    url, h = canned
    h.routes["/v1/chat/completions"] = (200, "application/json", json.dumps({
        "choices": [{"message": {"role": "assistant", "content": "done"}, "finish_reason": "length"}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 1}}).encode())
    out = OpenAIServerGenerator(url, model="m").generate(GenerationRequest.chat("x"))
    assert (out.text, out.prompt_tokens, out.completion_tokens, out.finish_reason) == ("done", 11, 1, "length")


def test_garbage_answer_is_one_sentence(canned):
    url, h = canned
    h.routes["/v1/chat/completions"] = (200, "text/html", b"<html>proxy login</html>")
    with pytest.raises(GenerationError, match="not JSON"):
        OpenAIServerGenerator(url, model="m").generate(GenerationRequest.chat("x"))


def test_model_name_and_context_come_from_the_server(canned):
    url, h = canned
    h.routes["/v1/models"] = (200, "application/json", b'{"data": [{"id": "qwen-coder-32b"}]}')
    h.routes["/props"] = (200, "application/json", b'{"default_generation_settings": {"n_ctx": 16384}}')
    h.routes["/tokenize"] = (200, "application/json", b'{"tokens": [1, 2, 3]}')
    client = OpenAIServerGenerator(url)
    assert (client.name, client.context_size) == ("qwen-coder-32b", 16384)
    assert client.count_tokens("abc def") == 3


def test_servers_without_extras_fall_back(canned):
    url, h = canned
    h.routes["/v1/models"] = (200, "application/json", b'{"data": []}')
    client = OpenAIServerGenerator(url)
    assert client.name == "default" and client.context_size == 8192
    assert client.count_tokens("x" * 40) == 10
