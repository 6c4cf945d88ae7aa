"""`/v1/realtime` on a vLLM-protocol server: a recording streamed the way a microphone would send it.

`session.update` names the model, a commit starts generation, the audio goes as `input_audio_buffer.append`
chunks of PCM16 (16 kHz, mono) paced at real time, and a final commit ends it; the server's deltas arrive while
audio is still being sent, and `transcription.done` closes the utterance. A server without the route (its
WebSocket handshake refused) or one answering `unsupported` is TranscriptionUnsupported: "this server does not
stream transcription; use a file".
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass

from protocol.common import dumps
from protocol.errors import ServerError, StreamError
from protocol.listen import (
    LISTEN_BYTES_PER_S,
    UNSUPPORTED_CODE,
    InputAudioBufferAppend,
    InputAudioBufferCommit,
    ListenProtocolError,
    RealtimeError,
    SessionUpdate,
    TranscriptionDelta,
    TranscriptionDone,
    TranscriptionUnsupported,
    parse_realtime_event,
)
from services.listen.rest import unreachable

OnPartial = Callable[[str], None]  # called with the text so far after each delta
LiveSource = AsyncIterator[bytes]  # PCM16 chunks (16 kHz, mono) as they are captured; its end ends the utterance
REFUSED_STATUSES = (400, 403, 404, 405, 426, 501)  # a handshake refused: no realtime route there


@dataclass
class StreamOutcome:
    """What a stream gave: the final text and its timings (perf_counter seconds)."""

    text: str = ""
    partial_text: str = ""
    partials: int = 0
    first_audio_t: float | None = None
    audio_start_t: float | None = None  # when the first audio sent began to be spoken (sent once spoken: earlier)
    last_audio_t: float | None = None
    first_partial_t: float | None = None
    done_t: float | None = None
    bytes_sent: int = 0  # PCM bytes sent (a live source's length is known only at its end)


def _event_error(event: RealtimeError, target: str) -> Exception:
    if event.code == UNSUPPORTED_CODE:
        return TranscriptionUnsupported()
    code = f" ({event.code})" if event.code else ""
    return ServerError(f"{target} refused the transcription stream: {event.error}{code}")


async def _connect(ws_url: str, timeout: float):  # type: ignore[no-untyped-def]
    from websockets.asyncio.client import connect
    from websockets.exceptions import (
        InvalidHandshake,
        InvalidMessage,
        InvalidStatus,
        InvalidURI,
    )

    try:
        return await connect(ws_url, open_timeout=timeout, max_size=16 * 1024 * 1024, compression=None)
    except InvalidStatus as exc:
        status = exc.response.status_code
        if status in REFUSED_STATUSES:
            raise TranscriptionUnsupported() from None
        raise ServerError(f"{ws_url} refused the transcription stream (HTTP {status})", status=status) from None
    except InvalidMessage:  # it answered, but not as a WebSocket server does (an HTTP/1.0 page, say)
        raise TranscriptionUnsupported() from None
    except InvalidURI as exc:
        raise ServerError(f"cannot open a transcription stream to {ws_url!r}: {exc}") from None
    except (OSError, TimeoutError, InvalidHandshake) as exc:
        raise unreachable(ws_url, exc) from None


async def _read(ws, out: StreamOutcome, target: str, on_partial: OnPartial | None) -> None:  # type: ignore[no-untyped-def]
    from websockets.exceptions import ConnectionClosed

    while True:
        try:
            frame = await ws.recv()
        except ConnectionClosed:
            raise StreamError(f"{target} closed the transcription stream before transcription.done") from None
        try:
            event = parse_realtime_event(frame)
        except ListenProtocolError as exc:
            raise StreamError(str(exc)) from None
        if isinstance(event, RealtimeError):
            raise _event_error(event, target)
        if isinstance(event, TranscriptionDelta) and event.delta:
            out.partials += 1
            out.partial_text += event.delta
            if out.first_partial_t is None:
                out.first_partial_t = time.perf_counter()
            if on_partial is not None:
                on_partial(out.partial_text.strip())
        elif isinstance(event, TranscriptionDone):
            out.done_t = time.perf_counter()
            out.text = event.text.strip()
            return


async def _send_audio(ws, pcm: bytes | LiveSource, out: StreamOutcome, chunk_s: float, pace: bool) -> None:  # type: ignore[no-untyped-def]
    from websockets.exceptions import ConnectionClosed

    try:
        if isinstance(pcm, bytes | bytearray):
            await _paced(ws, bytes(pcm), out, chunk_s, pace)
        else:
            await _live(ws, pcm, out)
    except ConnectionClosed:
        raise StreamError("the transcription stream closed while audio was still being sent") from None


async def _paced(ws, pcm: bytes, out: StreamOutcome, chunk_s: float, pace: bool) -> None:  # type: ignore[no-untyped-def]
    step = max(2, int(chunk_s * LISTEN_BYTES_PER_S) // 2 * 2)
    start = time.perf_counter()
    for at in range(0, len(pcm), step):
        piece = pcm[at:at + step]
        if pace:  # each piece once it has been spoken, as a microphone delivers it
            await asyncio.sleep(max(0.0, start + (at + len(piece)) / LISTEN_BYTES_PER_S - time.perf_counter()))
        await _append(ws, piece, out)
    await ws.send(dumps(InputAudioBufferCommit(final=True)))


async def _append(ws, chunk: bytes, out: StreamOutcome) -> None:  # type: ignore[no-untyped-def]
    await ws.send(dumps(InputAudioBufferAppend(audio=base64.b64encode(chunk).decode("ascii"))))
    out.bytes_sent += len(chunk)
    out.last_audio_t = time.perf_counter()
    if out.first_audio_t is None:
        out.first_audio_t = out.last_audio_t
        out.audio_start_t = out.last_audio_t - len(chunk) / LISTEN_BYTES_PER_S


async def _live(ws, source: LiveSource, out: StreamOutcome) -> None:  # type: ignore[no-untyped-def]
    """Send each chunk as the source yields it (a microphone paces itself); the source's end is the final commit.
    An odd trailing byte waits for the next chunk (the route takes whole samples only)."""
    carry = b""
    async for chunk in source:
        data = carry + bytes(chunk)
        cut = len(data) // 2 * 2
        carry = data[cut:]
        if cut:
            await _append(ws, data[:cut], out)
    await ws.send(dumps(InputAudioBufferCommit(final=True)))


async def queue_source(queue: asyncio.Queue[bytes | None], idle_s: float | None = None) -> LiveSource:
    """An asyncio.Queue of PCM chunks as a live source: None in the queue ends it — and so does no chunk for
    `idle_s` seconds (a browser's microphone that went away unannounced), when given."""
    while True:
        try:
            chunk = await asyncio.wait_for(queue.get(), idle_s)
        except TimeoutError:
            return
        if chunk is None:
            return
        yield chunk


async def stream_pcm(ws_url: str, pcm: bytes | LiveSource, *, model: str, language: str | None = None,
                     on_partial: OnPartial | None = None, chunk_s: float = 0.1, pace: bool = True,
                     connect_timeout: float = 10.0, answer_timeout: float = 60.0) -> StreamOutcome:
    """Stream 16 kHz mono PCM16 (a recording, or a live source) to `ws_url` and wait for the transcription."""
    ws = await _connect(ws_url, connect_timeout)
    return await stream_on(ws, ws_url, pcm, model=model, language=language, on_partial=on_partial,
                           chunk_s=chunk_s, pace=pace, connect_timeout=connect_timeout, answer_timeout=answer_timeout)


async def stream_on(ws, target: str, pcm: bytes | LiveSource, *, model: str, language: str | None = None,  # type: ignore[no-untyped-def]
                    on_partial: OnPartial | None = None, chunk_s: float = 0.1, pace: bool = True,
                    connect_timeout: float = 10.0, answer_timeout: float = 60.0) -> StreamOutcome:
    """The session over an open channel `ws` (async `recv()` of a text message, `send(text)`, `close()`): a
    WebSocket, or SageMaker's HTTP/2 bidirectional stream (services/listen/sagemaker.py). It is closed after.
    `pcm` is a whole recording (sent in `chunk_s` pieces, paced at real time when `pace`) or a live source of
    chunks (sent as they come; its end is the final commit)."""
    out = StreamOutcome()
    ws_url = target
    tasks: list[asyncio.Task[None]] = []
    try:
        try:
            first = parse_realtime_event(await asyncio.wait_for(ws.recv(), connect_timeout))
        except (ListenProtocolError, TimeoutError) as exc:
            raise StreamError(f"{ws_url} did not open a transcription session ({exc or 'timed out'})") from None
        if isinstance(first, RealtimeError):
            raise _event_error(first, ws_url)
        await ws.send(dumps(SessionUpdate(model=model, language=language)))
        await ws.send(dumps(InputAudioBufferCommit()))
        reader = asyncio.create_task(_read(ws, out, ws_url, on_partial))
        sender = asyncio.create_task(_send_audio(ws, pcm, out, chunk_s, pace))
        tasks = [reader, sender]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        if not reader.done() and sender.exception() is not None:  # the reader may have the server's reason
            await asyncio.wait([reader], timeout=1.0)
        if reader.done():  # an error (or an early done) ends the stream; the audio still unsent is dropped
            reader.result()
            return out
        sender.result()
        try:
            await asyncio.wait_for(reader, answer_timeout)
        except TimeoutError:
            raise StreamError(f"{ws_url} sent no transcription.done within {answer_timeout:.0f} s of the audio's "
                              "end") from None
        return out
    finally:
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(BaseException):
                await task
        with contextlib.suppress(Exception):
            await asyncio.wait_for(ws.close(), 2.0)
