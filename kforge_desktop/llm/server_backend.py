"""A model served by an OpenAI-compatible server on this machine (llama-server, vLLM, Ollama, SGLang).

Why: on a big workstation the user may already run a fast server with GPU offload and batching; we
talk to it with the standard ``/v1/chat/completions`` streaming protocol (server-sent events) using
only the standard library. The app promises offline operation, so only loopback hosts are accepted
unless the caller passes ``allow_remote=True`` explicitly; proxies from the environment are ignored.
"""

from __future__ import annotations

import ipaddress
import json
import math
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator

from .generator import (
    Generation,
    GenerationError,
    GenerationRequest,
    OnToken,
    decode_speed,
    find_stop,
    longest_stop_prefix,
)

DEFAULT_CONTEXT = 8192
PARALLEL_UNKNOWN = 8  # a server that does not say how many requests it serves at once batches them


def is_loopback_host(host: str | None) -> bool:
    """True for localhost, 127.0.0.0/8 and ::1 (names other than localhost are not resolved)."""
    if not host:
        return False
    host = host.strip("[]").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_url(base_url: str, allow_remote: bool = False) -> urllib.parse.SplitResult:
    """Validate the server address; raise GenerationError with the reason when we refuse it."""
    parts = urllib.parse.urlsplit(base_url if "://" in base_url else f"http://{base_url}")
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise GenerationError(f"{base_url!r} is not an http(s) server address such as http://127.0.0.1:8080.")
    if not allow_remote and not is_loopback_host(parts.hostname):
        raise GenerationError(
            f"refusing to send prompts to {parts.hostname}: Kernel Forge Desktop works offline and only talks "
            "to a model server on this machine (localhost, 127.0.0.1 or ::1); allow remote servers "
            "explicitly if you really mean it."
        )
    return parts


def estimate_tokens(text: str) -> int:
    """A rough count (about 4 characters per token for code and English) when the server gives none."""
    return max(1, math.ceil(len(text) / 4)) if text else 0


class OpenAIServerGenerator:
    """Streams completions from a local OpenAI-compatible server. Several searches or several
    expansions of one search may call ``generate`` at once: each request has its own connection."""

    def __init__(
        self,
        base_url: str,
        model: str | None = None,
        api_key: str | None = None,
        allow_remote: bool = False,
        timeout: float = 600.0,
        context_size: int | None = None,
    ) -> None:
        parts = check_url(base_url, allow_remote)
        path = parts.path.rstrip("/")
        if path.endswith("/v1"):
            path = path[: -len("/v1")]
        self.base = urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, "", ""))
        self.api_key = api_key
        self.timeout = timeout
        # no proxies: a loopback server must be reached directly, and nothing may leave the machine
        self._opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        self._model = model or self._first_model()
        self._context = context_size or self._server_context() or DEFAULT_CONTEXT
        self._tokenize_ok: bool | None = None
        self._parallel: int | None = None

    # -- plumbing -------------------------------------------------------------------------------------
    def _request(self, path: str, payload: dict | None = None, timeout: float | None = None):
        data = None if payload is None else json.dumps(payload).encode("utf-8")
        req = urllib.request.Request(self.base + path, data=data, method="GET" if data is None else "POST")
        req.add_header("Content-Type", "application/json")
        req.add_header("Accept", "text/event-stream, application/json")
        if self.api_key:
            req.add_header("Authorization", f"Bearer {self.api_key}")
        try:
            return self._opener.open(req, timeout=timeout or self.timeout)
        except urllib.error.HTTPError as err:
            raise GenerationError(f"the model server at {self.base} answered {err.code}: {_error_text(err)}") from None
        except urllib.error.URLError as err:
            raise GenerationError(f"cannot reach the model server at {self.base} ({err.reason}); is it running?") from None
        except TimeoutError:
            raise GenerationError(f"the model server at {self.base} did not answer in time.") from None
        except OSError as err:
            raise GenerationError(f"cannot reach the model server at {self.base} ({err}).") from None

    def _get_json(self, path: str) -> dict | None:
        try:
            with self._request(path, timeout=min(self.timeout, 10.0)) as resp:
                return json.loads(resp.read().decode("utf-8"))
        except (GenerationError, ValueError):
            return None

    def _first_model(self) -> str:
        listing = self._get_json("/v1/models")
        if listing is None:
            # say clearly whether the server is down (the usual case) or merely lacks the listing
            self._request("/v1/models", timeout=min(self.timeout, 10.0)).close()
        data = (listing or {}).get("data") or []
        return str(data[0].get("id")) if data and isinstance(data[0], dict) and data[0].get("id") else "default"

    def _server_context(self) -> int | None:
        props = self._get_json("/props") or {}  # llama-server only; others have no such endpoint
        n_ctx = (props.get("default_generation_settings") or {}).get("n_ctx")
        return int(n_ctx) if isinstance(n_ctx, int) and n_ctx > 0 else None

    # -- the Generator protocol -----------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self._model

    @property
    def context_size(self) -> int:
        return self._context

    @property
    def parallel(self) -> int:
        """How many requests the server answers at once: llama-server says (``total_slots`` of
        /props, its ``--parallel``); vLLM, SGLang and Ollama batch whatever comes, so as many as the
        search asks for. The search keeps K of them in flight (``search.inflight``)."""
        if self._parallel is None:
            slots = (self._get_json("/props") or {}).get("total_slots")
            self._parallel = int(slots) if isinstance(slots, int) and slots > 0 else PARALLEL_UNKNOWN
        return self._parallel

    def count_tokens(self, text: str) -> int:
        """llama-server's /tokenize when available, else an estimate."""
        if self._tokenize_ok is not False:
            try:
                with self._request("/tokenize", {"content": text}, timeout=min(self.timeout, 10.0)) as resp:
                    tokens = json.loads(resp.read().decode("utf-8")).get("tokens")
                if isinstance(tokens, list):
                    self._tokenize_ok = True
                    return len(tokens)
            except (GenerationError, ValueError, AttributeError):
                pass
            self._tokenize_ok = False
        return estimate_tokens(text)

    def _payload(self, request: GenerationRequest) -> tuple[str, dict]:
        body: dict = {
            "model": self._model,
            "max_tokens": request.max_tokens,
            "temperature": max(0.0, request.temperature),
            "top_p": request.top_p,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.seed is not None:
            body["seed"] = request.seed
        if request.stop:
            body["stop"] = list(request.stop)
        if request.grammar:
            body["grammar"] = request.grammar  # llama-server's field; other servers ignore or reject it
        if request.prompt is not None:
            body["prompt"] = request.prompt
            return "/v1/completions", body
        # request.prefill is not sent: servers differ in whether a last assistant message is continued
        # or answered, and an answer to it would garble the code; the model writes the whole answer
        body["messages"] = [m.to_dict() for m in request.messages]
        return "/v1/chat/completions", body

    def generate(self, request: GenerationRequest, on_token: OnToken | None = None,
                 cancel: threading.Event | None = None) -> Generation:
        path, body = self._payload(request)
        stops = list(request.stop)
        t0 = time.perf_counter()
        first_at: float | None = None
        text, emitted, chunks = "", 0, 0
        finish = "length"
        usage: dict = {}
        if cancel is not None and cancel.is_set():
            finish = "cancelled"
        else:
            resp = self._request(path, body)
            try:
                for event in _sse_events(resp):
                    if event.get("usage"):
                        usage = event["usage"]
                    if event.get("error"):
                        raise GenerationError(f"the model server reported an error: {_event_error(event)}")
                    for choice in event.get("choices") or []:
                        piece = (choice.get("delta") or {}).get("content") if "delta" in choice else choice.get("text")
                        if piece:
                            if first_at is None:
                                first_at = time.perf_counter()
                            chunks += 1
                            text += piece
                        if choice.get("finish_reason"):
                            finish = "length" if choice["finish_reason"] == "length" else "stop"
                    cut = find_stop(text, stops)
                    if cut >= 0:  # servers apply stop strings themselves; this guards those that do not
                        text, finish = text[:cut], "stop"
                        break
                    safe = len(text) - longest_stop_prefix(text, stops)
                    if on_token is not None and safe > emitted:
                        on_token(text[emitted:safe])
                        emitted = safe
                    if cancel is not None and cancel.is_set():
                        finish = "cancelled"
                        break
            except TimeoutError:
                raise GenerationError(f"the model server at {self.base} stopped answering.") from None
            except OSError as err:
                raise GenerationError(f"the connection to the model server at {self.base} broke ({err}).") from None
            finally:
                resp.close()  # closing the stream is how a client cancels: the server stops generating
        if on_token is not None and len(text) > emitted and finish != "cancelled":
            on_token(text[emitted:])
        seconds = time.perf_counter() - t0
        prompt_seconds = (first_at - t0) if first_at is not None else seconds
        n_prompt = usage.get("prompt_tokens")
        n_out = usage.get("completion_tokens")
        if not isinstance(n_prompt, int):
            n_prompt = self._estimate_prompt(request)
        if not isinstance(n_out, int):
            n_out = chunks  # servers stream one token per chunk
        return Generation(
            text=text,
            prompt_tokens=n_prompt,
            completion_tokens=n_out,
            seconds=seconds,
            tokens_per_s=decode_speed(n_out, seconds, prompt_seconds),
            model=self._model,
            finish_reason=finish,
            cancelled=finish == "cancelled",
            prompt_seconds=prompt_seconds,
        )

    def _estimate_prompt(self, request: GenerationRequest) -> int:
        if request.prompt is not None:
            return estimate_tokens(request.prompt)
        return sum(estimate_tokens(m.content) + 4 for m in request.messages)  # + role markers

    def close(self) -> None:
        """Nothing to release: each request opens and closes its own connection."""


def _sse_events(resp) -> Iterator[dict]:
    """Parse ``data: {...}`` lines of a server-sent event stream (or one plain JSON body)."""
    ctype = resp.headers.get("Content-Type", "")
    if "text/event-stream" not in ctype:
        body = resp.read().decode("utf-8", errors="replace")
        try:
            obj = json.loads(body)
        except ValueError:
            raise GenerationError(f"the model server sent something that is not JSON: {body[:120]!r}") from None
        # a non-streaming answer: turn it into one event with deltas
        for choice in obj.get("choices") or []:
            if "message" in choice:
                choice["delta"] = {"content": (choice.get("message") or {}).get("content")}
        yield obj
        return
    data: list[str] = []
    for raw in resp:
        line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        if line.startswith("data:"):
            data.append(line[5:].lstrip())
            continue
        if line == "" and data:
            payload = "\n".join(data)
            data = []
            if payload.strip() == "[DONE]":
                return
            try:
                yield json.loads(payload)
            except ValueError:
                raise GenerationError(f"the model server sent a malformed event: {payload[:120]!r}") from None
    if data and "\n".join(data).strip() not in ("", "[DONE]"):
        try:
            yield json.loads("\n".join(data))
        except ValueError:
            pass


def _event_error(event: dict) -> str:
    err = event.get("error")
    if isinstance(err, dict):
        return str(err.get("message") or err)
    return str(err)


def _error_text(err: urllib.error.HTTPError) -> str:
    try:
        body = err.read().decode("utf-8", errors="replace")
        obj = json.loads(body)
        msg = obj.get("error", obj)
        if isinstance(msg, dict):
            msg = msg.get("message", msg)
        return str(msg)[:200]
    except Exception:
        return str(err.reason)
