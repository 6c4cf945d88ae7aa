"""The reply stage: the agent's answer to what the person said, streamed in pieces as it is produced.

    stage = ChatReply("http://gpu-box:8000", system_prompt="You are a shop assistant.")   # a model
    stage = ScriptedReply(parse_script(text, "shop.txt"))                                 # offline, scripted
    async for piece in stage.stream([{"role": "user", "content": "what time do you open"}]):
        ...

`ChatReply` speaks any OpenAI-compatible `POST /v1/chat/completions` with `stream: true` (vLLM, vLLM-Omni —
Qwen3-Omni in text mode —, the OpenAI API): the system prompt, then the conversation so far; the answer arrives
as server-sent events `data: {...}` whose `choices[0].delta.content` is the next piece, ending with
`data: [DONE]`. A reply is capped: `max_tokens` goes in the request and at most that many content chunks are
read (servers stream about one token per chunk), and it stops after `max_seconds`; `capped` then says which cap
ended it (what came before is kept and spoken). `ScriptedReply` gives the script's reply in word-sized pieces
behind the same interface; its label says it is scripted, never a model.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import AsyncIterator
from typing import Any, Protocol

import httpx

from protocol.common import error_text
from protocol.errors import BackendUnreachable, ServerError, StreamError
from services.converse.script import Script

CHAT_PATH = "/v1/chat/completions"
DEFAULT_MAX_TOKENS = 200
DEFAULT_MAX_SECONDS = 20.0
Message = dict[str, str]  # {"role": "user" | "assistant" | "system", "content": ...}


class ReplyStage(Protocol):
    label: str
    capped: str | None  # why the last reply was cut ("tokens", "seconds"), else None

    def stream(self, messages: list[Message]) -> AsyncIterator[str]: ...


class ScriptedReply:
    """The script's reply to the last user message, in word-sized pieces (a scripted reply, not a model)."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.label = f"a scripted reply ({script.name}), not a model"
        self.capped: str | None = None

    async def stream(self, messages: list[Message]) -> AsyncIterator[str]:
        heard = next((m["content"] for m in reversed(messages) if m["role"] == "user"), "")
        for piece in re.findall(r"\S+\s*", self.script.reply_to(heard)):
            yield piece


def _unreachable(url: str, exc: Exception) -> BackendUnreachable:
    return BackendUnreachable(f"cannot reach the reply server at {url} ({type(exc).__name__}: {exc or 'timed out'}); "
                              "is it running, and is the URL right?")


async def sse_lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[str]:
    """The lines of a server-sent-event stream whose bytes arrive split anywhere — an HTTP body's reads, SageMaker's
    PayloadParts — even inside a line or a UTF-8 character: a line ends at LF (CRLF too); a last line without one
    still counts. The one reading of a chat reply's bytes, whatever carried them."""
    buffer = b""
    async for chunk in chunks:
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            yield line.removesuffix(b"\r").decode("utf-8", "replace")
    if buffer:
        yield buffer.removesuffix(b"\r").decode("utf-8", "replace")


def _piece(line: str, where: str) -> str | None:
    """The content of one SSE line ('' for lines without any); None at `data: [DONE]`."""
    if not line.startswith("data:"):
        return ""  # blank separators, comments (": ping"), event names
    data = line[5:].strip()
    if data == "[DONE]":
        return None
    try:
        chunk = json.loads(data)
    except ValueError:
        raise StreamError(f"{where} sent a chunk that is not JSON: {data[:80]!r}") from None
    if isinstance(chunk, dict) and "error" in chunk:
        err = chunk["error"]
        raise ServerError(f"{where} failed mid-reply: {err.get('message', err) if isinstance(err, dict) else err}")
    try:
        return chunk["choices"][0]["delta"].get("content") or "" if chunk.get("choices") else ""
    except (KeyError, IndexError, TypeError, AttributeError):
        raise StreamError(f"{where} sent a chunk without choices[0].delta: {data[:80]!r}") from None


class StreamedChat:
    """What every streamed chat completion shares, whatever carries it: the request (system prompt, then the
    conversation so far), the caps, and the reading of its server-sent events."""

    def __init__(self, *, model: str | None, system_prompt: str | None, max_tokens: int,
                 max_seconds: float) -> None:
        self.model = model
        self.system_prompt = (system_prompt or "").strip() or None
        self.max_tokens = max_tokens
        self.max_seconds = max_seconds
        self.capped: str | None = None

    def _body(self, model: str | None, messages: list[Message]) -> dict[str, Any]:
        """The request; without a model name the server answers with the one it serves."""
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        named = {"model": model} if model else {}
        return named | {"messages": system + list(messages), "stream": True, "max_tokens": self.max_tokens}

    async def _pieces(self, lines: AsyncIterator[str], deadline: float, where: str) -> AsyncIterator[str]:
        """The content pieces of the SSE lines, up to `data: [DONE]` or a cap (`capped` says which)."""
        chunks = 0
        async for line in lines:
            piece = _piece(line, where)
            if piece is None:
                return
            if piece:
                chunks += 1
                yield piece
            if chunks >= self.max_tokens:
                self.capped = "tokens"
                return
            if time.perf_counter() >= deadline:
                self.capped = "seconds"
                return


class ChatReply(StreamedChat):
    """A streamed chat completion from any OpenAI-compatible server (see the module's doc)."""

    def __init__(self, url: str, *, model: str | None = None, system_prompt: str | None = None,
                 max_tokens: int = DEFAULT_MAX_TOKENS, max_seconds: float = DEFAULT_MAX_SECONDS,
                 connect_timeout: float = 10.0) -> None:
        super().__init__(model=model, system_prompt=system_prompt, max_tokens=max_tokens, max_seconds=max_seconds)
        self.url = url.rstrip("/")
        self.connect_timeout = connect_timeout
        self.label = f"{model or 'the served model'} at {self.url}"

    def _http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=httpx.Timeout(self.max_seconds, connect=self.connect_timeout),
                                 trust_env=False)

    async def _model(self, http: httpx.AsyncClient) -> str:
        if self.model is None:
            try:
                resp = await http.get(self.url + "/v1/models")
            except httpx.HTTPError as exc:
                raise _unreachable(self.url, exc) from None
            try:
                self.model = str(resp.json()["data"][0]["id"])
            except (ValueError, KeyError, IndexError, TypeError):
                raise ServerError(f"{self.url}/v1/models named no model (HTTP {resp.status_code}): name the reply "
                                  "model") from None
            self.label = f"{self.model} at {self.url}"
        return self.model

    async def stream(self, messages: list[Message]) -> AsyncIterator[str]:
        self.capped = None
        deadline = time.perf_counter() + self.max_seconds
        async with self._http() as http:
            body = self._body(await self._model(http), messages)
            try:
                async with http.stream("POST", self.url + CHAT_PATH, json=body) as resp:
                    if resp.status_code != 200:
                        text = error_text((await resp.aread()).decode("utf-8", "replace"))  # never the raw body
                        raise ServerError(f"{self.url}{CHAT_PATH} answered HTTP {resp.status_code}"
                                          + (f": {text}" if text else ""), status=resp.status_code)
                    async for piece in self._pieces(sse_lines(resp.aiter_bytes()), deadline, self.url + CHAT_PATH):
                        yield piece
            except httpx.ReadTimeout:
                self.capped = "seconds"  # the server went quiet past the cap: the reply ends here
            except httpx.HTTPError as exc:
                raise _unreachable(self.url, exc) from None
