"""WebSocket `/v1/audio/speech/stream` (docs/protocols.md, "Speech stream"), as vLLM-Omni 0.30 serves it.

`session.config` first (within the config timeout), any number of `input.text`, `input.done` as a flush that
answers `session.done` and keeps the socket for the next utterance, `session.close`; per unit `audio.start`,
binary audio, and an `audio.done` that is always sent. Error texts and which errors end the connection follow
vLLM-Omni's handler; like it, a connection that ends on an error is dropped without a close frame. A client that
goes away cancels its synthesis: what is queued for it is dropped and the chunk being made is the last.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
from typing import Any

from fastapi import WebSocket, WebSocketDisconnect
from pydantic import BaseModel, ValidationError

from offline import voices
from offline.guards import seconds_setting
from offline.speech.checks import SpeechAsk, SpeechInputError, check_model, check_speech, resolve_style
from offline.splitter import TextSplitter
from offline.voice import Playback, SynthesisCancelled, VoiceEngine, encode_audio
from protocol.common import dumps, loads
from protocol.limits import (
    CONFIG_TIMEOUT_S,
    IDLE_TIMEOUT_S,
    MAX_CONFIG_MESSAGE_BYTES,
    MAX_INPUT_TEXT_MESSAGE_BYTES,
    PCM_SAMPLE_RATE,
)
from protocol.speech import AudioDone, AudioStart, ErrorEvent, SessionConfig, SessionDone

log = logging.getLogger(__name__)

CONFIG_TIMEOUT_ENV = "OMNI_ENGINE_CONFIG_TIMEOUT_S"
IDLE_TIMEOUT_ENV = "OMNI_ENGINE_IDLE_TIMEOUT_S"
EMBEDDING_WITH_REF_AUDIO = (
    "1 validation error for OpenAICreateSpeechRequest\n"
    "  Value error, 'speaker_embedding' and 'ref_audio' are mutually exclusive"
)


def _invalid_unicode(msg: dict[str, Any]) -> str | None:
    """Why a decoded message cannot be used (None when it can): a string holding a lone surrogate.

    JSON lets a client write "\\ud800" without its pair; that is no character, cannot be encoded as UTF-8, and
    would break the session the moment the text is echoed or spoken, so the message is refused instead.
    """
    def first_surrogate(value: Any, path: str) -> tuple[str, int, str] | None:
        if isinstance(value, str):
            for index, ch in enumerate(value):
                if "\ud800" <= ch <= "\udfff":
                    return path, index, ch
        elif isinstance(value, dict):
            for key, item in value.items():
                if (found := first_surrogate(key, path) or first_surrogate(item, f"{path}.{key}" if path else str(key))):
                    return found
        elif isinstance(value, list):
            for i, item in enumerate(value):
                if (found := first_surrogate(item, f"{path}[{i}]")):
                    return found
        return None

    found = first_surrogate(msg, "")
    if found is None:
        return None
    path, index, ch = found
    what = "The input text" if msg.get("type") == "input.text" and path == "text" else f"The field '{path}'"
    return (
        f"{what} is not valid Unicode: it holds a lone surrogate (U+{ord(ch):04X}) at index {index}, a JSON "
        "\\u escape without its pair; send the text as valid UTF-8"
    )



class _ClientGone(Exception):
    """The client closed the socket; stop generating and end the session quietly."""


class _EndSession(Exception):
    """The error is sent; end the connection the way vLLM-Omni does (its handler returns, no close frame)."""


class _Session:
    """One WebSocket connection: any number of utterances, strictly sequential units."""

    def __init__(self, websocket: WebSocket, *, config_timeout: float, idle_timeout: float) -> None:
        self.ws = websocket
        self.config_timeout = config_timeout
        self.idle_timeout = idle_timeout
        # A reader task drains the socket while units are generated, so a closed socket is noticed at once
        # (vLLM-Omni aborts the request when the client goes away): the serving task is cancelled, which
        # drops its queued synthesis, and `stop` tells the voice's worker to make no further chunk for it.
        self.inbox: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue(maxsize=64)
        self.gone = asyncio.Event()
        self.stop = threading.Event()
        self._serving: asyncio.Task[None] | None = None
        # The listener's clock for the voice's scheduler: one per utterance, shared by its units.
        self._playback: tuple[int, Playback] | None = None

    async def run(self) -> None:
        await self.ws.accept()
        self._serving = asyncio.create_task(self._serve())
        reader = asyncio.create_task(self._read())
        try:
            await self._serving
        except _ClientGone:
            log.info("speech stream: client disconnected")
        except _EndSession:
            pass
        except asyncio.CancelledError:
            if asyncio.current_task().cancelling():  # type: ignore[union-attr]
                raise  # the server itself is stopping this handler
            log.info("speech stream: client disconnected; its synthesis is cancelled")
        except Exception as exc:  # as vLLM-Omni: report, then end the connection
            log.exception("speech stream session error")
            with contextlib.suppress(_ClientGone):
                await self._send_error(f"Internal error: {exc}")
        finally:
            self._end_playback()
            self.stop.set()
            self._serving.cancel()
            reader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reader

    async def _read(self) -> None:
        try:
            while True:
                message = await self.ws.receive()
                if message["type"] == "websocket.disconnect":
                    break
                await self.inbox.put(message)
        except (WebSocketDisconnect, RuntimeError, OSError):
            pass
        finally:
            self.gone.set()
            self.stop.set()
            with contextlib.suppress(asyncio.QueueFull):
                self.inbox.put_nowait(None)
            if self._serving is not None and not self._serving.done():
                self._serving.cancel()  # nobody is left to hear the rest

    def _end_playback(self) -> None:
        """The utterance is over: the voice's scheduler stops counting this listener."""
        if self._playback is not None:
            self._playback[1].close()
            self._playback = None

    # -- sending ------------------------------------------------------------------------------------------
    async def _send_text(self, message: BaseModel) -> None:
        if self.gone.is_set():
            raise _ClientGone
        try:
            await self.ws.send_text(dumps(message))
        except (WebSocketDisconnect, RuntimeError, OSError) as exc:
            raise _ClientGone from exc

    async def _send_bytes(self, data: bytes) -> None:
        if self.gone.is_set():
            raise _ClientGone
        try:
            await self.ws.send_bytes(data)
        except (WebSocketDisconnect, RuntimeError, OSError) as exc:
            raise _ClientGone from exc

    async def _send_error(self, message: str, *, partial_audio: bool = False) -> None:
        if partial_audio:  # generation failed after some audio went out: the client should drop it
            await self._send_text(ErrorEvent(message=message, partial_audio=True, action="discard"))
        else:
            await self._send_text(ErrorEvent(message=message))

    # -- receiving ----------------------------------------------------------------------------------------
    async def _next_text(self, *, configured: bool) -> str:
        """The next text frame; after the config or idle timeout, or a binary frame, the session ends."""
        if self.gone.is_set() and self.inbox.empty():
            raise _ClientGone
        try:
            async with asyncio.timeout(self.idle_timeout if configured else self.config_timeout):
                message = await self.inbox.get()
        except TimeoutError:
            await self._send_error("Idle timeout: no message received" if configured else "Timeout waiting for session.config")
            raise _EndSession from None
        if message is None:
            raise _ClientGone
        text = message.get("text")
        if text is None:
            await self._send_error("Binary frames are not accepted: send each message as a JSON text frame")
            raise _EndSession
        return text

    async def _parse(self, raw: str) -> dict[str, Any] | None:
        """The message as a dict, or None after reporting why it was rejected (vLLM-Omni's order and texts)."""
        if len(raw) > max(MAX_CONFIG_MESSAGE_BYTES, MAX_INPUT_TEXT_MESSAGE_BYTES):
            await self._send_error("WebSocket message too large")
            return None
        try:
            msg = loads(raw)  # nesting deeper than JSON_MAX_DEPTH is invalid JSON too, not an internal error
        except json.JSONDecodeError:
            await self._send_error("Invalid JSON message")
            return None
        if not isinstance(msg, dict):
            await self._send_error("WebSocket messages must be JSON objects")
            return None
        if (error := _invalid_unicode(msg)) is not None:
            await self._send_error(error)
            return None
        if msg.get("type") == "session.config":
            if len(raw) > MAX_CONFIG_MESSAGE_BYTES:
                await self._send_error("session.config message too large")
                return None
        elif len(raw) > MAX_INPUT_TEXT_MESSAGE_BYTES:
            await self._send_error("input.text message too large")
            return None
        return msg

    async def _build_config(self, msg: dict[str, Any]) -> SessionConfig | None:
        try:
            config = SessionConfig.model_validate(msg)
        except ValidationError as exc:
            await self._send_error(f"Invalid session config: {exc}")
            return None
        if (error := check_model(config.model)) is not None:
            await self._send_error(error)
            return None
        return config

    # -- the protocol -------------------------------------------------------------------------------------
    async def _serve(self) -> None:
        config: SessionConfig | None = None
        splitter = TextSplitter("none")
        utterance_index = 0
        sentence_index = 0
        # From the first non-empty input.text to input.done; the buffer alone cannot tell, because
        # sentence/clause splitting can leave it empty after releasing a unit.
        utterance_open = False

        while True:
            raw = await self._next_text(configured=config is not None)
            msg = await self._parse(raw)
            if msg is None:
                if config is None:
                    return  # a malformed handshake ends the connection
                continue
            msg_type = msg.get("type")

            if msg_type == "session.config":
                if utterance_open:
                    await self._send_error(
                        "session.config cannot be applied while an utterance is in progress; send input.done first"
                    )
                    continue
                new_config = await self._build_config(msg)
                if new_config is None:
                    if config is None:
                        return
                    continue  # keep serving with the previous config
                config = new_config
                splitter = TextSplitter(config.split_granularity)

            elif config is None:
                await self._send_error(f"Expected session.config, got: {msg_type}")
                return

            elif msg_type == "input.text":
                text = msg.get("text", "")
                if not isinstance(text, str):
                    await self._send_error("input.text requires a string value")
                    continue
                if text:
                    utterance_open = True
                for unit in splitter.feed(text):
                    await self._speak_unit(config, unit, utterance_index, sentence_index)
                    sentence_index += 1

            elif msg_type == "input.done":
                for unit in splitter.flush():
                    await self._speak_unit(config, unit, utterance_index, sentence_index)
                    sentence_index += 1
                await self._send_text(SessionDone(utterance_index=utterance_index, total_sentences=sentence_index))
                self._end_playback()
                utterance_index += 1
                sentence_index = 0
                utterance_open = False

            elif msg_type == "session.close":
                with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):
                    await self.ws.close()
                return

            else:
                await self._send_error(f"Unknown message type: {msg_type}")

    async def _speak_unit(self, config: SessionConfig, text: str, utterance_index: int, sentence_index: int) -> None:
        """One unit: audio.start, its audio, audio.done — the done is sent even when generation fails."""
        if config.word_timestamps:
            # vLLM-Omni checks this before audio.start; the offline engine has no forced aligner.
            await self._send_error(
                "word_timestamps=true but the server was launched without --forced-aligner; either restart "
                "the server with that flag or set word_timestamps=false in session.config."
            )
            return
        ask = SpeechAsk.of(config)
        if ask.speaker_embedding is not None and ask.ref_audio is not None:
            # vLLM-Omni builds its speech request from the config here, and that request refuses the pair: the
            # error ends the connection as an internal error (its handler's catch-all).
            raise RuntimeError(EMBEDDING_WITH_REF_AUDIO)
        store = voices.store_of(self.ws.app)
        streamed_pcm = config.stream_audio and config.response_format == "pcm"
        await self._send_text(
            AudioStart(
                utterance_index=utterance_index,
                sentence_index=sentence_index,
                sentence_text=text,
                format=config.response_format,
                sample_rate=PCM_SAMPLE_RATE if streamed_pcm else None,
            )
        )
        total_bytes = 0
        failed = False
        try:
            error = check_speech(ask, text, store)
            if error is not None:
                raise SpeechInputError(error)
            engine: VoiceEngine = self.ws.app.state.voice
            style = await resolve_style(ask, store, engine)
            if self._playback is None or self._playback[0] != utterance_index:
                self._end_playback()
                self._playback = (utterance_index, Playback(streaming=config.stream_audio, lasting=True))
            playback = self._playback[1]
            if config.stream_audio:
                stream = engine.stream_pcm(text, fast_start=True, cancel=self.stop, style=style, playback=playback)
                async with contextlib.aclosing(stream) as stream:
                    async for chunk in stream:
                        await self._send_bytes(chunk)
                        total_bytes += len(chunk)
            else:
                pcm = bytearray()
                stream = engine.stream_pcm(text, speed=config.speed, fast_start=False, cancel=self.stop, style=style,
                                           playback=playback)
                async with contextlib.aclosing(stream):
                    async for chunk in stream:
                        pcm += chunk
                data = encode_audio(bytes(pcm), config.response_format)
                await self._send_bytes(data)
                total_bytes = len(data)
        except SynthesisCancelled:
            raise _ClientGone from None
        except _ClientGone:
            raise
        except Exception as exc:
            failed = True
            log.warning("generation failed for utterance %d, sentence %d: %s", utterance_index, sentence_index, exc)
            await self._send_error(
                f"Generation failed for utterance {utterance_index}, sentence {sentence_index}: {exc}",
                partial_audio=total_bytes > 0,
            )
        finally:
            if not self.gone.is_set():
                with contextlib.suppress(_ClientGone):
                    await self._send_text(
                        AudioDone(
                            utterance_index=utterance_index,
                            sentence_index=sentence_index,
                            total_bytes=total_bytes,
                            error=failed,
                        )
                    )


class SpeechStreamHandler:
    """Serves `/v1/audio/speech/stream` sessions; the timeouts are per handler so tests can shorten them."""

    def __init__(self, *, config_timeout: float = CONFIG_TIMEOUT_S, idle_timeout: float = IDLE_TIMEOUT_S) -> None:
        if config_timeout <= 0 or idle_timeout <= 0:
            raise ValueError("speech stream timeouts must be positive numbers of seconds")
        self.config_timeout = config_timeout
        self.idle_timeout = idle_timeout

    @classmethod
    def from_env(cls) -> SpeechStreamHandler:
        """Timeouts from OMNI_ENGINE_CONFIG_TIMEOUT_S / OMNI_ENGINE_IDLE_TIMEOUT_S (defaults 10 s / 30 s)."""
        return cls(
            config_timeout=seconds_setting(CONFIG_TIMEOUT_ENV, CONFIG_TIMEOUT_S),
            idle_timeout=seconds_setting(IDLE_TIMEOUT_ENV, IDLE_TIMEOUT_S),
        )

    async def handle(self, websocket: WebSocket) -> None:
        await _Session(websocket, config_timeout=self.config_timeout, idle_timeout=self.idle_timeout).run()

