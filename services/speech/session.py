"""Streaming speech: `SpeechClient` → `SpeechSession` over a `SpeechTransport`.

    client = omni_client("http://127.0.0.1:8091", settings)
    async with client.open(speech_config(voice="joe")) as session:
        async for event in session.speak("Hello there. How are you?"):
            ...                       # AudioStart, PcmChunk, AudioDone, ErrorEvent, SessionDone
        session.stats.ttfa_ms, session.wav()

    # or feed text as an LLM produces it:
        await session.feed("Hello ")
        await session.feed("there.")
        async for event in session.finish(): ...   # = end_input(), then events()

The session sends `session.config`, the text as one or more `input.text` (long text is cut under the
128 KiB message limit), then `input.done`. What goes out together is handed to the transport together
(`send_texts`, when it has it): the config waits for the utterance's first text, and `speak` sends its text
and `input.done` at once, so on SageMaker's HTTP/2 stream the first audio's request is one write, not small
writes each waiting behind the last one's ACK (Nagle against delayed ACKs, ~40 ms each). A config with no
text behind it goes out alone after CONFIG_HOLD_S, well inside the server's wait for it. A background reader takes every frame off the transport the
moment it arrives, updates the `Recording` (services/speech/recording.py: figures and PCM), and hands each PCM chunk to `on_audio`
(playback) before the caller even looks at it. The client and `SpeechRun` (one utterance watched from a UI
thread) are in services/speech/client.py, `speech_config` in services/speech/config.py, and what the session
yields and returns (`PcmChunk`, `SpeechEvent`, `Utterance`) in services/speech/events.py.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from protocol.common import dumps
from protocol.errors import InvalidInput, ServerError, StreamError, StudioError
from protocol.limits import MAX_INPUT_TEXT_MESSAGE_BYTES, PCM_CHANNELS, PCM_SAMPLE_RATE
from protocol.speech import (
    AudioDone,
    AudioStart,
    ErrorEvent,
    InputDone,
    InputText,
    ProtocolError,
    SessionClose,
    SessionConfig,
    SessionDone,
    parse_server_event,
)
from services.speech.config import streaming_config
from services.speech.events import OnAudio, PcmChunk, SpeechEvent, Utterance
from services.speech.recording import Recording, SessionStats, TtfaFrom
from services.speech.text import speakable, split_for_input
from services.speech.transport import SpeechTransport

log = logging.getLogger(__name__)

_END = object()
CONFIG_HOLD_S = 1.0  # a session.config waits this long for the first text to leave with (servers wait 10 s)


def _end_error(item: Any, stats: SessionStats, server_errors: list[str]) -> StudioError:
    """Why an utterance ended before `session.done` (`item`: what the reader queued), with the audio kept."""
    kept = f"{stats.bytes} bytes ({stats.audio_seconds:.2f} s) of audio kept"
    server = f" — the server said: {server_errors[-1]}" if server_errors else ""
    if isinstance(item, StudioError) and not isinstance(item, StreamError) and not stats.bytes:
        return item  # nothing streamed yet (the stream never opened): the transport's own message and type
    if isinstance(item, BaseException):
        return StreamError(f"{item}{server}; {kept}")
    if server_errors:
        return ServerError(f"{server_errors[-1]} (the server then closed the stream; {kept})")
    return StreamError(f"the server closed the speech stream before the utterance finished; {kept}")


class SpeechSession:
    """One connection to a speech server; carries any number of utterances, one at a time.

    Use as an async context manager. After a server error (e.g. an unknown voice) the session stays
    usable: `await session.configure(new_config)` and speak again.
    """

    def __init__(self, transport: SpeechTransport, config: SessionConfig | None = None, *,
                 on_audio: OnAudio | None = None) -> None:
        self.transport = transport
        self.config = streaming_config(config)
        self.on_audio = on_audio
        self.max_message_bytes = MAX_INPUT_TEXT_MESSAGE_BYTES  # per input.text (lowered in tests)
        self._recording = Recording()  # figures and audio, read from other threads (the UI)
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._reader: asyncio.Task | None = None
        self._connected = False
        self._cancelled = False
        self._utterance_open = False  # text sent, input.done not yet answered by session.done
        self._pending_space = ""  # whitespace fed before any real text (not sent until text follows)
        self._fmt = (PCM_SAMPLE_RATE, PCM_CHANNELS)  # of the current unit, from audio.start
        self._unit = (0, 0)  # (utterance_index, sentence_index) of the current unit
        self.unit_texts: dict[tuple[int, int], str] = {}  # each unit's sentence_text from its audio.start
        self._server_errors: list[str] = []
        self._held_config: str | None = None  # session.config not sent yet: it leaves with the next text
        self._config_timer: asyncio.TimerHandle | None = None
        self._config_flush: asyncio.Task | None = None
        self._send_lock = asyncio.Lock()
        self.hold_config = True  # False: the config is sent on its own at once (the old pattern; benchmarks)

    # ---- lifecycle ---------------------------------------------------------------------------------
    async def __aenter__(self) -> SpeechSession:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def connect(self) -> None:
        if self._cancelled:
            return
        await self.transport.connect()
        self._connected = True
        self._reader = asyncio.get_running_loop().create_task(self._read_frames(), name="speech-reader")
        await self._send_config()

    async def configure(self, config: SessionConfig) -> None:
        """Send a new `session.config` (voice, language, ...) for the next utterance."""
        if self._utterance_open:
            raise InvalidInput("finish the current utterance before changing the voice or language")
        self.config = streaming_config(config)
        await self._send_config()

    async def _send_config(self) -> None:
        """Hold the config for the next text (or CONFIG_HOLD_S), or send it now when `hold_config` is off."""
        if not self.hold_config:
            await self._send([dumps(self.config)])
            return
        self._held_config = dumps(self.config)  # a config held and not yet sent is simply replaced
        if self._config_timer is not None:
            self._config_timer.cancel()
        self._config_timer = asyncio.get_running_loop().call_later(CONFIG_HOLD_S, self._config_due)

    def _config_due(self) -> None:
        self._config_timer = None
        self._config_flush = asyncio.get_running_loop().create_task(self._flush_config(), name="speech-config")

    async def _flush_config(self) -> None:
        try:
            await self._send([])
        except StudioError as exc:  # the reader reports a broken stream to whoever waits for events
            log.info("sending the held session.config failed: %s", exc)

    async def _send(self, messages: list[str], *, end: bool = False) -> None:
        """Send `messages` (after the held config, if any) in order, together when the transport can; `end`:
        they are the last, and a transport that can end its input in the same write does (close() follows)."""
        async with self._send_lock:
            if self._held_config is not None:
                messages = [self._held_config, *messages]
                self._held_config = None
                if self._config_timer is not None:
                    self._config_timer.cancel()
                    self._config_timer = None
            if not messages:
                return
            send_texts = getattr(self.transport, "send_texts", None)
            if send_texts is not None and end:
                await send_texts(messages, end=True)
                return
            if send_texts is not None and len(messages) > 1:
                await send_texts(messages)
                return
            for message in messages:
                await self.transport.send_text(message)

    def _stop_config_timer(self) -> None:
        if self._config_timer is not None:
            self._config_timer.cancel()
            self._config_timer = None
        if self._config_flush is not None and not self._config_flush.done():
            self._config_flush.cancel()

    async def cancel(self) -> None:
        """Stop now: close the stream (the server aborts generation). Audio received so far is kept."""
        self._cancelled = True
        self._stop_config_timer()
        self._recording.cancel()
        await self.transport.close()

    async def aclose(self) -> None:
        if self._config_timer is not None:
            self._config_timer.cancel()
            self._config_timer = None
        if self._connected and not self._cancelled:
            try:
                await asyncio.wait_for(self._send([dumps(SessionClose())], end=True), timeout=2.0)
            except (StudioError, TimeoutError):
                pass
        self._stop_config_timer()
        self._connected = False
        await self.transport.close()
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()
            try:
                await self._reader
            except (asyncio.CancelledError, Exception):
                pass

    # ---- thread-safe views -------------------------------------------------------------------------
    @property
    def stats(self) -> SessionStats:
        """The current utterance's figures, live (`snapshot()` for a copy another thread may keep)."""
        return self._recording.stats

    def snapshot(self) -> SessionStats:
        return self._recording.snapshot()

    def recording(self) -> bytes:
        """PCM of the current (or last) utterance so far."""
        return self._recording.pcm()

    def wav(self) -> bytes:
        return self._recording.wav()

    # ---- sending -----------------------------------------------------------------------------------
    def _begin(self, ttfa_from: TtfaFrom) -> None:
        if self._utterance_open:
            return
        if not self._connected:
            raise StreamError(f"the speech stream to {self.transport.target} is not open")
        self._recording.begin(ttfa_from)
        self._server_errors = []
        self._utterance_open = True

    async def _send_pieces(self, pieces: list[str], *, done: bool = False) -> None:
        """The pieces as `input.text` messages (and `input.done` after them when `done`), handed over together."""
        messages = [dumps(InputText(text=piece)) for piece in pieces]
        if done:
            messages.append(dumps(InputDone()))
        self._recording.sent(time.perf_counter(), texts=len(pieces), done=done)
        await self._send(messages)

    async def feed(self, text: str) -> None:
        """Send more text of the current utterance (starts one if needed), as an LLM would produce it."""
        if not text:
            return
        if not self._utterance_open and not text.strip():
            self._pending_space += text  # nothing to say yet: do not open a request for whitespace
            return
        self._begin("first_text")
        text, self._pending_space = self._pending_space + text, ""
        await self._send_pieces(split_for_input(text, self.max_message_bytes))

    async def end_input(self) -> None:
        """Send `input.done`: the server speaks the rest, then answers `session.done`."""
        if self._cancelled:
            return
        if not self._utterance_open:
            self._pending_space = ""
            raise InvalidInput("there is no text to speak: type a sentence first")
        await self._send_pieces([], done=True)

    async def finish(self) -> AsyncIterator[SpeechEvent]:
        """`end_input()`, then yield the utterance's events up to and including `session.done`."""
        await self.end_input()
        if self._cancelled:
            return
        async for event in self.events():
            yield event

    async def speak(self, text: str) -> AsyncIterator[SpeechEvent]:
        """One whole utterance: the text (cut into parts if long), `input.done`, then its events.
        The text is checked here unless it comes checked (`speakable`) from the layer above."""
        text = speakable(text)
        if self._cancelled:
            return
        if self._utterance_open:
            raise InvalidInput("finish the current utterance first")
        pieces = split_for_input(text, self.max_message_bytes)
        self._begin("input.done" if len(pieces) == 1 else "first_text")
        await self._send_pieces(pieces, done=True)  # the text and input.done leave together
        if self._cancelled:
            return
        async for event in self.events():
            yield event

    async def say(self, text: str) -> Utterance:
        """Speak `text` to the end and return the Utterance; stream and server errors go in `.error`."""
        error: StudioError | None = None
        try:
            async for _ in self.speak(text):
                pass
        except InvalidInput:
            raise
        except StudioError as exc:
            error = exc
        stats = self.snapshot()
        if error is None and stats.error is not None and stats.state == "failed":
            error = ServerError(stats.error)
        return Utterance(str(text), self.config.voice, self.config.language, stats, self.recording(), error)

    # ---- receiving ---------------------------------------------------------------------------------
    async def events(self) -> AsyncIterator[SpeechEvent]:
        """The current utterance's events as they arrive, up to and including `session.done`.

        finish() and speak() iterate this for you; iterate it yourself from another task to consume
        audio while you are still feeding text, then call end_input().
        """
        while True:
            item = await self._queue.get()
            if item is _END or isinstance(item, BaseException):
                self._utterance_open = False
                if self._cancelled:
                    return
                err = _end_error(item, self.stats, self._server_errors)
                self._recording.end("failed", str(err))
                raise err
            yield item
            if isinstance(item, SessionDone):
                self._utterance_open = False
                return

    async def _read_frames(self) -> None:
        try:
            while True:
                frame = await self.transport.receive()
                if frame is None:
                    break
                event = self._on_frame(frame)
                if event is not None:
                    self._queue.put_nowait(event)
        except StudioError as exc:
            self._queue.put_nowait(exc)
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a broken transport must still end the utterance with a message
            self._queue.put_nowait(StreamError(f"reading the speech stream from {self.transport.target} failed: {exc!r}"))
            return
        self._queue.put_nowait(_END)

    def _on_frame(self, frame: str | bytes) -> SpeechEvent | None:
        now = time.perf_counter()
        if isinstance(frame, bytes | bytearray | memoryview):
            data = bytes(frame)
            if not data:
                return None
            rate, channels = self._fmt
            self._recording.audio(data, rate, channels, now)
            chunk = PcmChunk(data, self._unit[0], self._unit[1], rate, channels)
            if self.on_audio is not None:
                try:
                    self.on_audio(chunk)
                except Exception:
                    log.exception("on_audio callback failed; the session goes on")
            return chunk
        try:
            event = parse_server_event(frame)
        except ProtocolError as exc:
            log.warning("%s", exc)
            return None
        if isinstance(event, AudioStart):
            self._fmt = (event.sample_rate or PCM_SAMPLE_RATE, PCM_CHANNELS)  # streamed PCM is mono
            self._unit = (event.utterance_index, event.sentence_index)
            self.unit_texts[self._unit] = event.sentence_text  # set before its audio reaches on_audio
        elif isinstance(event, AudioDone):
            self._recording.unit_done()
        elif isinstance(event, ErrorEvent):
            self._server_errors.append(event.message)
            self._recording.server_error(event.message)
        elif isinstance(event, SessionDone):
            self._recording.end("failed" if self._server_errors else "done")
        return event
