"""The reply stage: the agent's answer to what the person said, streamed in pieces as it is produced.

    stage = ChatReply("http://gpu-box:8000", system_prompt="You are a shop assistant.")   # a model
    stage = ScriptedReply(parse_script(text, "shop.txt"))                                 # offline, scripted
    async for piece in stage.stream([{"role": "user", "content": "what time do you open"}]):
        ...

`ChatReply` speaks any OpenAI-compatible `POST /v1/chat/completions` with `stream: true` (vLLM, vLLM-Omni —
Qwen3-Omni in text mode —, the OpenAI API): the system prompt, then the conversation so far; the answer arrives
as server-sent events `data: {...}` whose `choices[0].delta.content` is the next piece, ending with
`data: [DONE]`. A reply is capped, whatever the server sends:

- `max_tokens` goes in the request and at most that many content chunks are read (servers stream about one token
  per chunk); `capped` is then "tokens" and what came is kept and spoken;
- `max_seconds` of wall time from the request (the model lookup, the connection, every read): when some of the
  reply had come, `capped` is "seconds" and it is kept; when none had, it is the error "no reply … within N s";
- `max_bytes` read off the wire in all, and `max_line_bytes` in one line of its events: more is an error naming
  the cap (a reply of 200 tokens is a few tens of KB; a line a few hundred bytes).

An answer that is not server-sent events (a web page, JSON), or that ends before any reply without `data: [DONE]`,
is an error too: a failed reply is the turn's error, never an empty answer. `bytes_read` counts what the last reply
read. `ScriptedReply` gives the script's reply in word-sized pieces behind the same interface; its label says it is
scripted, never a model.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from collections.abc import AsyncIterator, Awaitable
from typing import Any, Protocol, TypeVar

import httpx

from protocol.common import error_text
from protocol.errors import BackendUnreachable, ServerError, StreamError
from services.converse.script import Script

CHAT_PATH = "/v1/chat/completions"
EVENT_STREAM = "text/event-stream"
DEFAULT_MAX_TOKENS = 200  # content chunks of one reply (about one token each): a few spoken sentences
DEFAULT_MAX_SECONDS = 20.0  # wall time of one reply, from the request to its last piece: a turn cannot hang longer
# Bytes of one reply read off the wire: 200 chunks of a vLLM stream are about 50 KB, so 1 MB is 20 times what a
# reply needs, and a server streaming megabytes is stopped long before memory matters.
DEFAULT_MAX_BYTES = 1_000_000
# Bytes of one line of the events: a chunk's `data: {...}` line is a few hundred bytes; 64 KB bounds the line held
# while waiting for its line break (a server that never sends one).
DEFAULT_MAX_LINE_BYTES = 64_000
# How much of an error answer's body is read to find its JSON error field (of which at most 300 characters, on one
# line, are shown: protocol.common.error_text); never the raw body, and never more than this in memory.
ERROR_BODY_BYTES = 16_000
Message = dict[str, str]  # {"role": "user" | "assistant" | "system", "content": ...}
T = TypeVar("T")


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
    return BackendUnreachable(f"cannot reach the reply server at {url} ({type(exc).__name__}: {str(exc) or 'no answer'}); "
                              "is it running, and is the URL right?")


def size_text(n: int) -> str:
    """A byte cap as people read it, in the decimal units the caps are set in: 1 MB, 64 KB, 300 bytes."""
    if n >= 1_000_000:
        return f"{n / 1_000_000:g} MB"
    return f"{n / 1000:g} KB" if n >= 1000 else f"{n} bytes"


class OutOfTime(Exception):
    """The reply's wall-time cap passed while it waited for the server (not an error yet: see `_pieces`)."""


def now() -> float:
    """The clock the reply's deadline is on (the event loop's, which `asyncio.timeout_at` uses)."""
    return asyncio.get_running_loop().time()


async def within(awaitable: Awaitable[T], deadline: float) -> T:
    """`awaitable`'s result, waited for until `deadline` (now()) at most; OutOfTime after it."""
    timeout = asyncio.timeout_at(deadline)
    try:
        async with timeout:
            return await awaitable
    except TimeoutError:
        if timeout.expired():
            raise OutOfTime from None
        raise


def check_event_stream(content_type: str | None, where: str) -> None:
    """A chat reply streams as server-sent events; anything else (a web page, JSON) is refused, naming its type."""
    kind = (content_type or "").split(";")[0].strip().lower()
    if kind != EVENT_STREAM:
        raise StreamError(f"{where} answered {kind or 'with no Content-Type'}, not server-sent events ({EVENT_STREAM}):"
                          " is it an OpenAI-compatible chat server streaming /v1/chat/completions?")


async def sse_lines(chunks: AsyncIterator[bytes], *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
                    where: str = "the reply server") -> AsyncIterator[str]:
    """The lines of a server-sent-event stream whose bytes arrive split anywhere — an HTTP body's reads, SageMaker's
    PayloadParts — even inside a line or a UTF-8 character: a line ends at LF (CRLF too); a last line without one
    still counts. A line longer than `max_line_bytes` is an error before it is held. The one reading of a chat
    reply's bytes, whatever carried them."""
    line = bytearray()
    async for chunk in chunks:
        start = 0
        while True:
            end = chunk.find(b"\n", start)
            if len(line) + (len(chunk) if end < 0 else end) - start > max_line_bytes:
                raise StreamError(f"{where} sent a line that exceeded {size_text(max_line_bytes)} (the cap on one line "
                                  "of a reply's server-sent events): that is not a chat reply")
            if end < 0:
                line += chunk[start:]
                break
            line += chunk[start:end]
            text = bytes(line).removesuffix(b"\r").decode("utf-8", "replace")
            line.clear()
            start = end + 1
            yield text
    if line:
        yield bytes(line).removesuffix(b"\r").decode("utf-8", "replace")


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
    conversation so far), the caps (see the module's doc), and the reading of its server-sent events."""

    def __init__(self, *, model: str | None, system_prompt: str | None, max_tokens: int, max_seconds: float,
                 max_bytes: int = DEFAULT_MAX_BYTES, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self.model = model
        self.system_prompt = (system_prompt or "").strip() or None
        self.max_tokens = max_tokens
        self.max_seconds = max_seconds
        self.max_bytes = max_bytes
        self.max_line_bytes = max_line_bytes
        self.capped: str | None = None
        self.bytes_read = 0  # of the last reply, off the wire

    def _body(self, model: str | None, messages: list[Message]) -> dict[str, Any]:
        """The request; without a model name the server answers with the one it serves."""
        system = [{"role": "system", "content": self.system_prompt}] if self.system_prompt else []
        named = {"model": model} if model else {}
        return named | {"messages": system + list(messages), "stream": True, "max_tokens": self.max_tokens}

    async def _wire(self, chunks: AsyncIterator[bytes], deadline: float, where: str) -> AsyncIterator[bytes]:
        """The bytes as they arrive, each read waited for until `deadline` at most (OutOfTime), `max_bytes` of them
        in all (`bytes_read` counts them; more is an error naming the cap)."""
        parts = aiter(chunks)
        while True:
            if now() >= deadline:  # a server whose bytes are always there never makes a read wait
                raise OutOfTime
            try:
                chunk = await within(anext(parts), deadline)
            except StopAsyncIteration:
                return
            self.bytes_read += len(chunk)
            if self.bytes_read > self.max_bytes:
                raise StreamError(f"the reply from {where} exceeded {size_text(self.max_bytes)} (the cap on one "
                                  f"reply's bytes; {self.max_tokens} tokens are far less): that is not a chat reply")
            yield chunk

    def _lines(self, chunks: AsyncIterator[bytes], deadline: float, where: str) -> AsyncIterator[str]:
        """The lines of the events carried by `chunks`, under every byte and time cap."""
        return sse_lines(self._wire(chunks, deadline, where), max_line_bytes=self.max_line_bytes, where=where)

    async def _pieces(self, lines: AsyncIterator[str], deadline: float, where: str) -> AsyncIterator[str]:
        """The content pieces of the SSE lines, up to `data: [DONE]` or a cap (`capped` says which). The time cap
        reached before any piece is an error naming it, as is an answer that ended with neither a piece nor
        `data: [DONE]`."""
        chunks = 0
        try:
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
                if now() >= deadline:
                    raise OutOfTime
        except OutOfTime:
            if not chunks:
                raise StreamError(f"no reply from {where} within {self.max_seconds:g} s (the cap on one reply's "
                                  "time)") from None
            self.capped = "seconds"  # the reply ends here: what came is kept
            return
        if not chunks:
            raise StreamError(f"{where} ended its answer before any reply (no content, no `data: [DONE]`)")


class ChatReply(StreamedChat):
    """A streamed chat completion from any OpenAI-compatible server (see the module's doc)."""

    def __init__(self, url: str, *, model: str | None = None, system_prompt: str | None = None,
                 max_tokens: int = DEFAULT_MAX_TOKENS, max_seconds: float = DEFAULT_MAX_SECONDS,
                 max_bytes: int = DEFAULT_MAX_BYTES, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
                 connect_timeout: float = 10.0) -> None:
        super().__init__(model=model, system_prompt=system_prompt, max_tokens=max_tokens, max_seconds=max_seconds,
                         max_bytes=max_bytes, max_line_bytes=max_line_bytes)
        self.url = url.rstrip("/")
        self.connect_timeout = connect_timeout
        self.label = f"{model or 'the served model'} at {self.url}"

    def _http(self) -> httpx.AsyncClient:
        # identity: the bytes counted are the bytes read (a compressed body could inflate a thousandfold)
        return httpx.AsyncClient(timeout=httpx.Timeout(self.max_seconds, connect=self.connect_timeout),
                                 trust_env=False, headers={"Accept-Encoding": "identity"})

    async def _open(self, http: httpx.AsyncClient, method: str, path: str, deadline: float,
                    **kw: Any) -> httpx.Response:
        """The response to a request, its body still to read (raw: not decoded), within the deadline."""
        resp = await within(http.send(http.build_request(method, self.url + path, **kw), stream=True), deadline)
        encoding = resp.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            await resp.aclose()
            raise StreamError(f"{self.url}{path} answered with Content-Encoding {encoding}, which was not asked for "
                              "(Accept-Encoding: identity)")
        return resp

    async def _model(self, http: httpx.AsyncClient, deadline: float) -> str:
        if self.model is None:
            path = "/v1/models"
            resp = await self._open(http, "GET", path, deadline)
            try:
                raw = b"".join([chunk async for chunk in self._wire(resp.aiter_raw(), deadline, self.url + path)])
            finally:
                await resp.aclose()
            self.bytes_read = 0  # the reply's own bytes are counted from here
            try:
                self.model = str(json.loads(raw)["data"][0]["id"])
            except (ValueError, KeyError, IndexError, TypeError):
                raise ServerError(f"{self.url}/v1/models named no model (HTTP {resp.status_code}): name the reply "
                                  "model") from None
            self.label = f"{self.model} at {self.url}"
        return self.model

    async def _excerpt(self, resp: httpx.Response, deadline: float, where: str) -> str:
        """The start of an error answer's body (ERROR_BODY_BYTES at most, read under the caps)."""
        head = bytearray()
        async with contextlib.aclosing(self._wire(resp.aiter_raw(), deadline, where)) as body:
            async for chunk in body:
                head += chunk
                if len(head) >= ERROR_BODY_BYTES:
                    break
        return head[:ERROR_BODY_BYTES].decode("utf-8", "replace")

    async def _answer(self, http: httpx.AsyncClient, messages: list[Message], deadline: float) -> AsyncIterator[bytes]:
        """The chat answer's bytes (the model looked up first when not named), under the caps."""
        where = self.url + CHAT_PATH
        try:
            body = self._body(await self._model(http, deadline), messages)
            resp = await self._open(http, "POST", CHAT_PATH, deadline, json=body)
            try:
                if resp.status_code != 200:
                    text = error_text(await self._excerpt(resp, deadline, where))  # never the raw body
                    raise ServerError(f"{self.url}{CHAT_PATH} answered HTTP {resp.status_code}"
                                      + (f": {text}" if text else ""), status=resp.status_code)
                check_event_stream(resp.headers.get("content-type"), where)
                async for chunk in resp.aiter_raw():
                    yield chunk
            finally:
                await resp.aclose()
        except httpx.ReadTimeout:
            raise OutOfTime from None  # the server went quiet past the cap
        except httpx.HTTPError as exc:
            raise _unreachable(self.url, exc) from None

    async def stream(self, messages: list[Message]) -> AsyncIterator[str]:
        self.capped, self.bytes_read = None, 0
        deadline = now() + self.max_seconds
        where = self.url + CHAT_PATH
        async with self._http() as http, contextlib.aclosing(self._answer(http, messages, deadline)) as answer:
            async for piece in self._pieces(self._lines(answer, deadline, where), deadline, where):
                yield piece
