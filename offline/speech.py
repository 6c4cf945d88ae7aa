"""The offline engine's speech routes, behaving as vLLM-Omni 0.30 does wherever a client can observe it.

- WebSocket `/v1/audio/speech/stream` (docs/protocols.md, "Speech stream"): `session.config` first (within the
  config timeout), any number of `input.text`, `input.done` as a flush that answers `session.done` and
  keeps the socket for the next utterance, `session.close`; per unit `audio.start`, binary audio, and an
  `audio.done` that is always sent. Error texts and which errors end the connection follow vLLM-Omni's
  handler; like it, a connection that ends on an error is dropped without a close frame.
- `POST /v1/audio/speech` (wav, pcm, flac, mp3, opus; raw-audio and SSE streaming). The voices routes are
  in offline.voices.

All three Qwen3-TTS task types are served (protocol.speech.OFFLINE_TASK_TYPES), checked with vLLM-Omni's texts
in its order: CustomVoice (a preset voice, optional style `instructions`), VoiceDesign (`instructions`
describe the voice) and Base (cloning from `ref_audio` + `ref_text`, a `speaker_embedding`, or an uploaded
voice's name). A request naming a model is held to that checkpoint's one task type, as a vLLM-Omni server
serving it would be. What the task asks for is previewed on the Piper voice (offline.styles): REST answers say
what was done in the `X-Offline-Preview` header.

A client that goes away (socket closed, HTTP connection dropped, streamed or not) cancels its synthesis:
what is queued for it on the voice's worker is dropped and the chunk being made is the last.

The voice is Piper on CPU (offline.voice), standing in for the Qwen3-TTS models the DLC runs.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import Any

from fastapi import APIRouter, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ValidationError

from offline import voice, voices
from offline.guards import unless_disconnected
from offline.splitter import TextSplitter, strip_blank
from offline.styles import (
    Style,
    combined,
    style_for_embedding,
    style_for_instructions,
    style_for_pitch,
    style_for_speaker,
)
from protocol.common import ErrorInfo, ErrorResponse, dumps, loads
from protocol.limits import (
    CONFIG_TIMEOUT_S,
    IDLE_TIMEOUT_S,
    INSTRUCTIONS_MAX_CHARS,
    MAX_CONFIG_MESSAGE_BYTES,
    MAX_INPUT_TEXT_MESSAGE_BYTES,
    PCM_SAMPLE_RATE,
    Range,
)
from protocol.speech import (
    SPEECH_STREAM_PATH,
    AudioDone,
    AudioStart,
    ErrorEvent,
    SessionConfig,
    SessionDone,
    SpeechAudioDelta,
    SpeechAudioDone,
    SpeechAudioError,
    VOICE_MODELS,
    SpeechRequest,
)

log = logging.getLogger(__name__)

CONFIG_TIMEOUT_ENV = "OMNI_ENGINE_CONFIG_TIMEOUT_S"
IDLE_TIMEOUT_ENV = "OMNI_ENGINE_IDLE_TIMEOUT_S"
# The model the voice endpoint serves on the DLC; the offline engine answers to its name.
SPEECH_MODEL = "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"
MAX_INSTRUCTIONS_CHARS = INSTRUCTIONS_MAX_CHARS
MAX_NEW_TOKENS = Range(1, 4096)  # vLLM-Omni's bounds on max_new_tokens
EMBEDDING_WITH_REF_AUDIO = (
    "1 validation error for OpenAICreateSpeechRequest\n"
    "  Value error, 'speaker_embedding' and 'ref_audio' are mutually exclusive"
)
PREVIEW_HEADER = "X-Offline-Preview"  # what a REST answer's style preview did (offline.styles)
STREAMING_FORMATS = ("pcm", "wav")


# ---------------------------------------------------------------------------------------------------------
# Request checks shared by the WebSocket and REST paths (vLLM-Omni's Qwen3-TTS wording)
def check_model(model: str | None) -> str | None:
    """The engine answers to every Qwen3-TTS model id; naming one makes it that checkpoint (its task type)."""
    if model is not None and model != SPEECH_MODEL and model not in VOICE_MODELS:
        return f"The model `{model}` does not exist."
    return None


def resolve_voice(name: str | None) -> str | None:
    """The lower-cased voice to speak with; None for the model's default speaker."""
    if name is None or name.lower() == voice.DEFAULT_VOICE:
        return None
    return name.lower()


@dataclass(frozen=True)
class SpeechAsk:
    """What a request asks of the voice besides its text: the fields SessionConfig and SpeechRequest share."""

    voice: str | None = None
    language: str | None = None
    task_type: str | None = None
    instructions: str | None = None
    ref_audio: str | None = None
    ref_text: str | None = None
    x_vector_only_mode: bool | None = None
    speaker_embedding: list[float] | None = None
    max_new_tokens: int | None = None
    model: str | None = None
    seed: int | None = None

    @classmethod
    def of(cls, request: SessionConfig | SpeechRequest) -> SpeechAsk:
        return cls(**{f: getattr(request, f) for f in cls.__dataclass_fields__})

    def task(self, store: voices.VoiceStore) -> str:
        """The task vLLM-Omni runs: a reference implies Base, and so does an uploaded voice's name."""
        task_type = self.task_type
        if task_type is None and (self.ref_audio is not None or self.ref_text is not None):
            task_type = "Base"
        if store.get(self.voice) is not None:
            task_type = "Base"
        return task_type or "CustomVoice"


def _model_variant(model: str | None) -> str | None:
    types = VOICE_MODELS.get(model or "")
    return types[0] if types and len(types) == 1 else None


def _needs_ref_text(ask: SpeechAsk, x_vector_only: bool) -> str | None:
    if not x_vector_only and not (ask.ref_text and ask.ref_text.strip()):
        return (
            "Base task requires non-empty 'ref_text' (transcript of the reference audio) unless "
            "'x_vector_only_mode' is enabled"
        )
    return None


def check_speech(ask: SpeechAsk, text: str, store: voices.VoiceStore) -> str | None:
    """Why this request cannot be spoken (None when it can), in vLLM-Omni's words and order.

    The offline engine serves all three task types; a request that names a model is held to that model's one.
    """
    task = ask.task(store)
    variant = _model_variant(ask.model)
    if variant is not None and task != variant:
        return (
            f"Qwen3-TTS {variant} checkpoint does not support task_type='{task}'. "
            f"Use task_type='{variant}' or load the matching {task} checkpoint."
        )
    if not text or not strip_blank(text):  # vLLM-Omni strips whitespace; zero-width characters are as empty
        return "Input text cannot be empty"
    if (nul := text.find("\x00")) >= 0:  # the voice (espeak) reads C strings: it would stop or fail there
        return f"Input text contains a NUL character (U+0000) at index {nul}; remove it"
    if ask.language is not None and ask.language.title() not in voice.LANGUAGES:
        return f"Invalid language '{ask.language.title()}'. Supported: {', '.join(sorted(voice.LANGUAGES))}"
    chosen = resolve_voice(ask.voice)
    if task == "CustomVoice" and chosen is not None and chosen not in voice.VOICE_NAMES:
        supported = sorted({*voice.VOICE_NAMES, voice.DEFAULT_VOICE, *store.names()})
        return f"Invalid voice '{chosen}'. Supported: {', '.join(supported)}"
    x_vector_only = bool(ask.x_vector_only_mode)
    if ask.speaker_embedding is not None:
        if task != "Base":
            return "'speaker_embedding' is only valid for Base task"
        if not ask.speaker_embedding:
            return "'speaker_embedding' must be a non-empty list of floats"
        x_vector_only = True  # an embedding implies x-vector-only cloning
        if (error := voices.embedding_dim_error(len(ask.speaker_embedding), ask.model)) is not None:
            return error
    if task == "Base":
        if ask.voice is None:
            if ask.ref_audio is None and ask.speaker_embedding is None:
                return "Base task requires 'ref_audio' or 'speaker_embedding' for voice cloning"
            if ask.ref_audio is not None and (error := voices.ref_audio_format_error(ask.ref_audio)):
                return error
            if (error := _needs_ref_text(ask, x_vector_only)) is not None:
                return error
        elif store.get(ask.voice) is None:  # a built-in speaker: the reference must come with the request
            if ask.ref_audio is None:
                return f"Base task with built-in speaker '{ask.voice.lower()}' requires 'ref_audio' for voice cloning"
            if (error := voices.ref_audio_format_error(ask.ref_audio)) is not None:
                return error
            if (error := _needs_ref_text(ask, x_vector_only)) is not None:
                return error
    else:
        if ask.ref_text is not None:
            return "'ref_text' is only valid for Base task"
        if ask.x_vector_only_mode is not None:
            return "'x_vector_only_mode' is only valid for Base task"
    if task == "VoiceDesign" and not ask.instructions:
        return "VoiceDesign task requires 'instructions' to describe the voice"
    if ask.instructions and len(ask.instructions) > MAX_INSTRUCTIONS_CHARS:
        return f"Instructions too long (max {MAX_INSTRUCTIONS_CHARS} characters)"
    if ask.max_new_tokens is not None:
        if ask.max_new_tokens < MAX_NEW_TOKENS.lo:
            return f"max_new_tokens must be at least {MAX_NEW_TOKENS.lo}"
        if ask.max_new_tokens > MAX_NEW_TOKENS.hi:
            return f"max_new_tokens cannot exceed {MAX_NEW_TOKENS.hi}"
    return None


async def resolve_style(ask: SpeechAsk, store: voices.VoiceStore) -> Style | None:
    """How the Piper voice previews this (checked) request; None: the plain voice. SpeechInputError if it cannot.

    CustomVoice: the preset speaker's rendering (offline.styles.SPEAKERS) with the style `instructions` on top.
    VoiceDesign: the description's words. Base: the reference's median pitch — `ref_audio` when given, else the
    uploaded voice — or an embedding's fixed pitch. A `seed` makes the plain voice or a preset speaker
    deterministic (the engine has no randomness to seed: any seed, same audio).
    """
    style = await _style(ask, store)
    if ask.seed is not None:
        return Style(deterministic=True) if style is None else replace(style, deterministic=True)
    return style


async def _style(ask: SpeechAsk, store: voices.VoiceStore) -> Style | None:
    task = ask.task(store)
    if task in ("CustomVoice", "VoiceDesign"):
        speaker = style_for_speaker(resolve_voice(ask.voice) or "") if task == "CustomVoice" else None
        if not ask.instructions:
            return speaker
        source = "the voice description" if task == "VoiceDesign" else "the style instructions"
        style = style_for_instructions(ask.instructions, source=source)
        return style if speaker is None else combined(speaker, style)
    if ask.ref_audio is not None:
        try:
            reference = await voices.reference_from_data_url(ask.ref_audio)
        except voices.VoiceError as exc:
            raise SpeechInputError(str(exc)) from None
        if reference.median_f0 is None:
            raise SpeechInputError(voices.no_pitch_message("ref_audio"))
        return style_for_pitch(reference.median_f0, await voice.voice_median_f0(), source="the ref_audio recording")
    stored = store.get(ask.voice)
    if stored is not None:
        if stored.embedding_style is not None:
            return replace(stored.embedding_style, source=f"uploaded voice '{stored.info.name}' (embedding)")
        if stored.median_f0 is None:
            raise SpeechInputError(voices.no_pitch_message(f"The recording of uploaded voice '{stored.info.name}'"))
        return style_for_pitch(stored.median_f0, await voice.voice_median_f0(),
                               source=f"uploaded voice '{stored.info.name}'")
    if ask.speaker_embedding:
        return style_for_embedding(ask.speaker_embedding)
    return None


class SpeechInputError(ValueError):
    """A request the voice cannot speak; the message says what to change."""


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


# ---------------------------------------------------------------------------------------------------------
# WebSocket /v1/audio/speech/stream
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
        self._playback: tuple[int, voice.Playback] | None = None

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
            style = await resolve_style(ask, store)
            if self._playback is None or self._playback[0] != utterance_index:
                self._end_playback()
                self._playback = (utterance_index, voice.Playback(streaming=config.stream_audio, lasting=True))
            playback = self._playback[1]
            if config.stream_audio:
                stream = voice.stream_pcm(text, fast_start=True, cancel=self.stop, style=style, playback=playback)
                async with contextlib.aclosing(stream) as stream:
                    async for chunk in stream:
                        await self._send_bytes(chunk)
                        total_bytes += len(chunk)
            else:
                pcm = bytearray()
                stream = voice.stream_pcm(text, speed=config.speed, fast_start=False, cancel=self.stop, style=style,
                                          playback=playback)
                async with contextlib.aclosing(stream):
                    async for chunk in stream:
                        pcm += chunk
                data = voice.encode_audio(bytes(pcm), config.response_format)
                await self._send_bytes(data)
                total_bytes = len(data)
        except voice.SynthesisCancelled:
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
            config_timeout=_seconds_from_env(CONFIG_TIMEOUT_ENV, CONFIG_TIMEOUT_S),
            idle_timeout=_seconds_from_env(IDLE_TIMEOUT_ENV, IDLE_TIMEOUT_S),
        )

    async def handle(self, websocket: WebSocket) -> None:
        await _Session(websocket, config_timeout=self.config_timeout, idle_timeout=self.idle_timeout).run()


def _seconds_from_env(name: str, default: float) -> float:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        seconds = float(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not a number of seconds") from None
    if seconds <= 0:
        raise ValueError(f"{name}={value!r} must be a positive number of seconds")
    return seconds


# ---------------------------------------------------------------------------------------------------------
# REST
def _error(message: str, status: int = 400, error_type: str = "BadRequestError") -> JSONResponse:
    body = ErrorResponse(error=ErrorInfo(message=message, type=error_type, code=status))
    return JSONResponse(body.model_dump(), status_code=status)


async def _speech_file(text: str, speed: float, response_format: str, style: Style | None) -> bytes:
    pcm = bytearray()
    async with contextlib.aclosing(voice.stream_pcm(text, speed=speed, fast_start=False, style=style)) as stream:
        async for chunk in stream:
            pcm += chunk
    return voice.encode_audio(bytes(pcm), response_format)


async def _raw_audio(text: str, response_format: str, style: Style | None) -> AsyncIterator[bytes]:
    if response_format == "wav":
        yield voice.wav_stream_header()
    # Starlette cancels the response when the client disconnects; closing the stream drops its queued work.
    async with contextlib.aclosing(voice.stream_pcm(text, fast_start=True, style=style)) as stream:
        async for chunk in stream:
            yield chunk


async def _sse_events(text: str, response_format: str, style: Style | None) -> AsyncIterator[str]:
    def event(message: BaseModel) -> str:
        return f"event: {message.type}\ndata: {dumps(message)}\n\n"  # type: ignore[attr-defined]

    emitted = False
    try:
        async with contextlib.aclosing(_raw_audio(text, response_format, style)) as audio:
            async for chunk in audio:
                emitted = True
                yield event(SpeechAudioDelta(audio=base64.b64encode(chunk).decode("ascii"), response_format=response_format))
        yield event(SpeechAudioDone())
    except Exception as exc:
        log.exception("SSE speech generation failed")
        extra = {"partial_audio": True, "action": "discard"} if emitted else {}
        yield event(SpeechAudioError(error=ErrorInfo(message=str(exc), type="server_error", code=500, **extra)))


def _create_router() -> APIRouter:
    @contextlib.asynccontextmanager
    async def lifespan(_app):
        voice.preload()  # load Piper on its worker thread while the engine starts answering
        yield

    router = APIRouter(lifespan=lifespan)
    handler = SpeechStreamHandler.from_env()

    @router.websocket(SPEECH_STREAM_PATH)
    async def speech_stream(websocket: WebSocket) -> None:
        await handler.handle(websocket)

    @router.post("/v1/audio/speech")
    async def create_speech(request: Request) -> Response:
        try:
            req = SpeechRequest.model_validate_json(await request.body())
        except ValidationError as exc:
            return _error(str(exc))
        if (error := check_model(req.model)) is not None:
            return _error(error, 404, "NotFoundError")

        raw_stream = req.stream_format == "audio"
        sse = (req.stream or req.stream_format == "sse") and not raw_stream
        if raw_stream or sse:
            if req.response_format not in STREAMING_FORMATS:
                return _error(
                    "Streaming (stream=true, stream_format='audio', or stream_format='sse') requires "
                    f"response_format='pcm' or 'wav'. Got response_format='{req.response_format}'."
                )
            if req.speed != 1.0:
                label = "Streaming" if raw_stream else "SSE streaming"
                return _error(
                    f"{label} is not supported with speed adjustment. "
                    "Use a non-streaming request or remove the speed parameter."
                )
        ask = SpeechAsk.of(req)
        store = voices.store_of(request.app)
        error = check_speech(ask, req.input, store)
        if error is not None:
            return _error(error)
        try:
            style = await resolve_style(ask, store)
        except SpeechInputError as exc:
            return _error(str(exc))
        headers = {PREVIEW_HEADER: style.label()} if style is not None and style.source else None

        if raw_stream:
            return StreamingResponse(_raw_audio(req.input, req.response_format, style),
                                     media_type=voice.MEDIA_TYPES[req.response_format], headers=headers)
        if sse:
            return StreamingResponse(_sse_events(req.input, req.response_format, style), media_type="text/event-stream",
                                     headers=headers)
        try:
            data = await unless_disconnected(request.receive, _speech_file(req.input, req.speed, req.response_format, style))
        except Exception as exc:  # an error body, as vLLM-Omni answers, never a bare 500 with a traceback
            log.exception("speech generation failed")
            return _error(f"Speech generation failed: {exc}", 500, "InternalServerError")
        if data is None:
            log.info("speech request: client disconnected; its synthesis is cancelled")
            return Response(status_code=499)  # nobody reads it
        return Response(content=data, media_type=voice.MEDIA_TYPES[req.response_format], headers=headers)

    return router


router = _create_router()
