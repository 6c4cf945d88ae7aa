"""The reply stage's caps against real hostile chat servers on 127.0.0.1 (issue 31): one that streams megabytes
with no line break, one that sends 5 MB chunks of keep-alive lines, one that trickles a byte at a time, one that
accepts and never answers, one that answers 200 with an HTML page. Each reply stops at its cap (a line's bytes, a
reply's bytes, its time) with an error naming the cap; what was read is bounded (counted by the stage and by the
server); the same caps hold over SageMaker's response stream (the emulator playing the hostile server as the
endpoint's container); the CLI makes it the turn's error and exits 1 when no turn was answered. Time caps are
passed small, so nothing sits for the product's 20 s."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from protocol.errors import StudioError
from services.aws import AwsSession
from services.converse.reply import DEFAULT_MAX_BYTES, DEFAULT_MAX_LINE_BYTES, ChatReply
from services.converse.sagemaker import EndpointReply
from tests.conftest import free_port, spoken_turn_files

pytest.register_assert_rewrite("tests.emulator_support")
from tests.emulator_support import IMAGE_URI, EmulatorHandle, deploy_endpoint  # noqa: E402
from tests.cli_support import run_cli

pytest_plugins = ["tests.emulator_support"]

ROOT = Path(__file__).resolve().parent.parent
CHAT_IMAGE = IMAGE_URI.replace(":omni-", ":chat-")  # the image a hostile server plays (the emulator's containers)
READ_SIZE = 65536  # the most one read off the wire gives (httpcore's read size): the slack over a byte cap
FLOOD_BYTES = 48_000_000  # what the flooding servers would send in all if nobody stopped reading (they stop then)
HUGE_CHUNK = 5_000_000  # one write of the huge-chunk server
LIFETIME_S = 30.0  # no handler of a hostile server lives longer
MESSAGES = [{"role": "user", "content": "what time do you open"}]


class Hostile:
    """A plain asyncio HTTP/1.1 server on a free 127.0.0.1 port, on a thread of its own, playing one misbehaving
    OpenAI-compatible chat server on `POST /v1/chat/completions` (`behaviour`: one of the methods below);
    `GET /v1/models` names a model (the silent server never answers it either). `sent` counts the body bytes it
    got onto the wire (drained) before the client went away. Every loop is bounded by bytes or by LIFETIME_S."""

    def __init__(self, behaviour: str, *, interval_s: float = 0.25) -> None:
        self.behaviour = behaviour
        self.interval_s = interval_s
        self.sent = 0
        self.port = free_port()
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._tasks: set[asyncio.Task] = set()
        self._thread = threading.Thread(target=asyncio.run, args=(self._main(),), daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> Hostile:
        self._thread.start()
        assert self._ready.wait(10), "the hostile server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    async def _main(self) -> None:
        self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
        server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self._ready.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._stop.wait(), LIFETIME_S * 2)
        server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._tasks.add(task := asyncio.current_task())  # type: ignore[arg-type]
        try:
            await asyncio.wait_for(self._serve(reader, writer), LIFETIME_S)
        except (ConnectionError, TimeoutError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass  # the client went away, the handler's life ended, or the server is stopping
        finally:
            writer.close()
            self._tasks.discard(task)  # type: ignore[arg-type]

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1")
        length = next((int(line.split(":", 1)[1]) for line in head.split("\r\n")
                       if line.lower().startswith("content-length:")), 0)
        await reader.readexactly(length)
        method, path = head.split(" ")[:2]
        if self.behaviour == "silent":
            await reader.read(1)  # never answers; returns when the client hangs up
        elif method == "GET" and path == "/v1/models":
            await self._answer(writer, "application/json", b'{"object": "list", "data": [{"id": "hostile/model"}]}')
        elif method == "POST" and path == "/v1/chat/completions":
            await getattr(self, self.behaviour)(writer)
        else:
            await self._answer(writer, "application/json", b'{"status": "ok"}')  # /health, /ping

    @staticmethod
    async def _answer(writer: asyncio.StreamWriter, content_type: str, body: bytes) -> None:
        writer.write(f"HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                     "Connection: close\r\n\r\n".encode() + body)
        await writer.drain()

    async def _stream(self, writer: asyncio.StreamWriter, pieces: Iterator[bytes], interval_s: float = 0.0) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
        await writer.drain()
        for piece in pieces:
            writer.write(piece)
            await writer.drain()
            self.sent += len(piece)
            if interval_s:
                await asyncio.sleep(interval_s)

    async def no_newline(self, writer: asyncio.StreamWriter) -> None:
        """`data: xxxx…` for FLOOD_BYTES, never a line break."""
        await self._stream(writer, iter([b"data: "] + [b"x" * READ_SIZE] * (FLOOD_BYTES // READ_SIZE)))

    async def huge_chunks(self, writer: asyncio.StreamWriter) -> None:
        """5 MB writes of 1000-byte keep-alive comment lines (each a valid SSE line), FLOOD_BYTES in all."""
        line = b": keep-alive " + b"." * 986 + b"\n"
        await self._stream(writer, iter([line * (HUGE_CHUNK // len(line))] * (FLOOD_BYTES // HUGE_CHUNK)))

    async def trickle(self, writer: asyncio.StreamWriter) -> None:
        """One byte of a valid event every `interval_s`, for as long as its life lasts (at most 400 bytes)."""
        await self._stream(writer, (b"d" for _ in range(400)), self.interval_s)

    async def gzip(self, writer: asyncio.StreamWriter) -> None:
        """A compressed answer though identity was asked for: 93 KB on the wire that inflate to FLOOD_BYTES of
        keep-alive lines (a compression bomb)."""
        body = zlib.compress(b": keep-alive\n" * (FLOOD_BYTES // 13), 9, wbits=31)  # gzip
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Encoding: gzip\r\n"
                     b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body))
        writer.write(body)
        await writer.drain()
        self.sent += len(body)

    async def html(self, writer: asyncio.StreamWriter) -> None:
        """200 with a web page: some proxy or a login portal, not a chat server."""
        await self._answer(writer, "text/html; charset=utf-8",
                           b"<!doctype html>\n<html><body>\n<h1>Welcome</h1>\n</body></html>\n")


def reply_of(stage) -> tuple[list[str], str | None]:  # type: ignore[no-untyped-def]
    """The pieces the stage gave, and its error's message (None when it ended without one)."""
    pieces: list[str] = []

    async def run() -> None:
        async for piece in stage.stream(MESSAGES):
            pieces.append(piece)

    try:
        asyncio.run(run())
    except StudioError as exc:
        return pieces, str(exc)
    return pieces, None


# --------------------------------------------------------------------------------------------------
# The reply URL (ChatReply over HTTP)
def failed_reply(behaviour: str, **kw: object) -> tuple[ChatReply, str, Hostile]:
    """A ChatReply (`kw`: its model and caps) from a hostile server: it gave no piece and failed naming the server."""
    with Hostile(behaviour) as server:
        stage = ChatReply(server.url, **{"model": "m", **kw})  # type: ignore[arg-type]
        pieces, error = reply_of(stage)
    assert not pieces and error is not None and server.url in error, error
    return stage, error, server


def test_megabytes_with_no_line_break_stop_at_the_line_cap() -> None:
    stage, error, server = failed_reply("no_newline")
    assert "exceeded 64 KB" in error and "one line" in error
    assert stage.bytes_read <= DEFAULT_MAX_LINE_BYTES + READ_SIZE  # the bytes read: one line's cap and one read
    assert server.sent < FLOOD_BYTES // 4  # the client stopped reading; it did not swallow the flood


def test_huge_chunks_stop_at_the_reply_cap() -> None:
    stage, error, server = failed_reply("huge_chunks")
    assert "exceeded 1 MB" in error
    assert stage.bytes_read <= DEFAULT_MAX_BYTES + READ_SIZE
    assert server.sent < FLOOD_BYTES // 4


def test_a_trickle_stops_at_the_time_cap() -> None:
    stage, error, server = failed_reply("trickle", max_seconds=1.0)
    assert error.startswith(f"no reply from {server.url}/v1/chat/completions within 1 s")
    assert 0 < stage.bytes_read < 100  # it was trickling: a few bytes, read as they came


@pytest.mark.parametrize("model", ["m", None], ids=["chat-request", "model-lookup"])
def test_a_server_that_never_answers_stops_at_the_time_cap(model: str | None) -> None:
    stage, error, server = failed_reply("silent", model=model, max_seconds=1.0)
    assert error.startswith(f"no reply from {server.url}") and "within 1 s" in error
    assert stage.bytes_read == 0


def test_a_compressed_answer_is_refused_before_it_is_inflated() -> None:
    stage, error, server = failed_reply("gzip")
    assert "answered with Content-Encoding gzip, which was not asked for" in error
    assert stage.bytes_read == 0 and server.sent < DEFAULT_MAX_BYTES  # small on the wire, not a byte of it read


def test_a_web_page_is_not_a_reply() -> None:
    _, error, _ = failed_reply("html")
    assert "answered text/html, not server-sent events (text/event-stream)" in error


# --------------------------------------------------------------------------------------------------
# The same caps over SageMaker's response stream (the emulator playing each hostile server as the container)
def test_the_caps_hold_on_a_reply_endpoint(emulator_env: EmulatorHandle) -> None:
    deploy_endpoint(emulator_env, "sm-hostile", image=CHAT_IMAGE, environment={"SM_VLLM_MODEL": "hostile/model"})
    where = "SageMaker endpoint sm-hostile (us-east-1)"

    def endpoint_reply(behaviour: str, **caps: float) -> tuple[EndpointReply, str | None, Hostile]:
        with Hostile(behaviour) as server:
            emulator_env.configure(containers={":chat-": server.url})
            stage = EndpointReply(AwsSession("us-east-1", connect_timeout=2, read_timeout=60), "sm-hostile",
                                  model="hostile/model", **caps)  # type: ignore[arg-type]
            pieces, error = reply_of(stage)
        assert not pieces and error is not None and where in error, (behaviour, error)
        return stage, error, server

    stage, error, server = endpoint_reply("no_newline")
    assert "exceeded 64 KB" in error and stage.bytes_read <= DEFAULT_MAX_LINE_BYTES + READ_SIZE
    assert server.sent < FLOOD_BYTES // 4
    stage, error, server = endpoint_reply("huge_chunks")
    assert "exceeded 1 MB" in error and stage.bytes_read <= DEFAULT_MAX_BYTES + READ_SIZE
    assert server.sent < FLOOD_BYTES // 4
    stage, error, _ = endpoint_reply("trickle", max_seconds=1.0)
    assert error.startswith(f"no reply from {where}") and "within 1 s" in error and stage.bytes_read < 100
    stage, error, _ = endpoint_reply("silent", max_seconds=1.0)
    assert error.startswith(f"no reply from {where}") and "within 1 s" in error and stage.bytes_read == 0
    _, error, _ = endpoint_reply("html")
    assert "answered text/html, not server-sent events (text/event-stream)" in error


# --------------------------------------------------------------------------------------------------
# The CLI: the failed reply is the turn's error, and exit 1 when no turn was answered
@pytest.fixture(scope="module")
def turn(engine_url: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return spoken_turn_files(engine_url, tmp_path_factory.mktemp("turns"), ["What time do you open?"])[0]


def converse(engine_url: str, turn: Path, reply_url: str) -> subprocess.CompletedProcess[str]:
    args = ["--input", str(turn), "--listen-url", engine_url, "--speak-url", engine_url, "--reply-url", reply_url,
            "--reply-model", "m", "--json"]
    return run_cli([sys.executable, "-m", "services", "converse", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT, env={**os.environ, "OMNI_STUDIO_CONFIG": ""})


@pytest.mark.parametrize("behaviour,cap", [("html", "answered text/html"), ("no_newline", "exceeded 64 KB")])
def test_the_cli_makes_a_failed_reply_the_turns_error_and_exits_1(engine_url: str, turn: Path, behaviour: str,
                                                                   cap: str) -> None:
    with Hostile(behaviour) as server:
        p = converse(engine_url, turn, server.url)
    assert p.returncode == 1, p.stderr  # no turn was answered
    (t,) = json.loads(p.stdout)["turns"]
    assert t["user_text"] and cap in t["error"] and server.url in t["error"]  # heard; the reply's failure kept
    assert t["reply_text"] == "" and t["first_audio_s"] is None
    assert f"error: turn 1: {t['error']}" in p.stderr
    assert server.sent < FLOOD_BYTES // 4


class EmptyReply(Hostile):
    """A well-formed reply with nothing in it: the role, then `data: [DONE]`."""

    async def empty(self, writer: asyncio.StreamWriter) -> None:
        await self._stream(writer, iter([b'data: {"choices": [{"delta": {"role": "assistant"}}]}\n\n',
                                         b"data: [DONE]\n\n"]))


def test_the_cli_exits_1_when_every_reply_was_empty(engine_url: str, turn: Path) -> None:
    with EmptyReply("empty") as server:
        p = converse(engine_url, turn, server.url)
    assert p.returncode == 1, p.stderr
    (t,) = json.loads(p.stdout)["turns"]
    assert t["user_text"] and t["error"] is None and t["first_audio_s"] is None
    assert "no turn was answered" in p.stderr and "empty" in p.stderr
