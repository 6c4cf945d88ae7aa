"""Listen on a SageMaker listen endpoint (Voxtral behind the vLLM-Omni DLC), over the same `Listener` interface.

- a file: `invoke_endpoint` with the multipart body of `POST /v1/audio/transcriptions` and
  `CustomAttributes="route=/v1/audio/transcriptions"`. InvokeEndpoint takes at most 6 MB: a longer recording is
  cut at its quietest moments into WAV pieces under that, each transcribed, the texts joined and the segments
  moved to their place; the transcript's `fitting` says so.
- a stream: `/v1/realtime` over the HTTP/2 bidirectional stream (invocation path `v1/realtime`), each JSON
  event one UTF8 PayloadPart — the transport the voice path uses (`Http2SpeechTransport`, sharing the backend's
  one HTTP/2 client), driven by the same session code as the WebSocket (`realtime.stream_on`).

The model named is the endpoint's (looked up once: DescribeEndpoint → config → model); credentials that may only
invoke name the listen family's default. An endpoint serving a model of another family is refused, naming it.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any

import botocore.exceptions as bx
import httpx
import numpy as np
from pydantic import ValidationError

from protocol.audio import wav_bytes
from protocol.catalog import model as catalog_model
from protocol.common import error_text, plain_excerpt
from protocol.errors import BackendUnreachable, ConfigError, ServerError, StreamError
from protocol.limits import REALTIME_PAYLOAD_MAX_BYTES
from protocol.listen import (
    DEFAULT_LISTEN_MODEL,
    FILE_FIELD,
    LISTEN_BYTES_PER_S,
    LISTEN_SAMPLE_RATE,
    REALTIME_PATH,
    TRANSCRIPTIONS_PATH,
    TranscriptionForm,
    TranscriptionFormat,
    TranscriptionVerbose,
)
from protocol.sagemaker import route_attribute
from services.aws import AwsSession, aws_error, missing_endpoint
from services.listen import realtime
from services.listen.audio import ListenAudio, NoSpeech
from services.listen.client import stream_transcript
from services.listen.rest import VERBOSE_REFUSED
from services.listen.transcript import Segment, Transcript

REALTIME_INVOCATION_PATH = REALTIME_PATH.lstrip("/")  # SageMaker wants it without the leading slash
MULTIPART_SLACK = 1024  # room for the file part's own headers (the probe body holds every other part)
FRAME_S = 0.1  # the loudness of the audio is measured per 100 ms when a cut is sought
SEARCH_FRACTION = 0.25  # a cut is sought in the last quarter of each piece


def multipart(audio_name: str, data: bytes, form: TranscriptionForm) -> tuple[bytes, str]:
    """The body and Content-Type `POST /v1/audio/transcriptions` takes (as the URL client sends it)."""
    files = {FILE_FIELD: (audio_name.rsplit("/", 1)[-1] or "audio", data, "application/octet-stream")}
    request = httpx.Request("POST", "http://sagemaker.invalid" + TRANSCRIPTIONS_PATH, data=form.form_fields(),
                            files=files)
    return request.read(), request.headers["content-type"]


def cut_at_silences(pcm: bytes, max_bytes: int) -> list[tuple[float, bytes]]:
    """16 kHz mono PCM16 cut into pieces whose WAV files are at most `max_bytes`, each cut at the quietest 100 ms
    in the last quarter of its stretch: [(start second, pcm)]."""
    limit = (max_bytes - 44) // 2 * 2  # a WAV header is 44 bytes
    if limit <= 0:
        raise ValueError("max_bytes leaves no room for audio")
    frame = int(FRAME_S * LISTEN_BYTES_PER_S) // 2 * 2
    pieces: list[tuple[float, bytes]] = []
    at = 0
    while len(pcm) - at > limit:
        end = at + limit
        lo = end - int(limit * SEARCH_FRACTION) // frame * frame
        samples = np.frombuffer(pcm[lo:end], dtype="<i2").astype(np.float32)
        n = samples.size // (frame // 2)
        if n > 0:
            rms = np.sqrt((samples[: n * (frame // 2)].reshape(n, -1) ** 2).mean(axis=1))
            quietest = int(np.argmin(rms))
            end = lo + quietest * frame + frame // 2 // 2 * 2  # the middle of the quietest frame
        pieces.append((at / LISTEN_BYTES_PER_S, pcm[at:end]))
        at = end
    pieces.append((at / LISTEN_BYTES_PER_S, pcm[at:]))
    return pieces


class SageMakerListen:
    """The listen endpoint of a SageMaker deployment (see the module's doc)."""

    def __init__(self, aws: AwsSession, endpoint: str | None, *, transport: Callable[[str], Any],
                 lookup_model: Callable[[], str], model: str | None = None, timeout: float = 120.0, max_bytes: int = REALTIME_PAYLOAD_MAX_BYTES) -> None:
        self.aws = aws
        self.endpoint = endpoint
        self._transport = transport  # invocation path -> a connected-on-demand Http2SpeechTransport
        self._lookup_model = lookup_model  # the endpoint's model id (services.sagemaker.endpoint_model)
        self._model = model
        self._lock = threading.Lock()
        self.timeout = timeout
        self.max_bytes = max_bytes
        where = f"SageMaker endpoint {endpoint} ({aws.region})" if endpoint else "SageMaker (no listen endpoint)"
        self.target = where

    # -- the model -------------------------------------------------------------------------------
    def model_id(self) -> str:
        """The endpoint's model, looked up once; the listen default when it cannot be read (invoke-only
        credentials). ConfigError when the endpoint serves a model of another family."""
        if self.endpoint is None:
            raise missing_endpoint("listen")
        with self._lock:
            if self._model is None:
                try:
                    self._model = self._lookup_model()
                except (ServerError, BackendUnreachable):  # denied, or no control plane: invoking may still work
                    self._model = DEFAULT_LISTEN_MODEL
                if self._model == "unknown":
                    self._model = DEFAULT_LISTEN_MODEL
            known = catalog_model(self._model)
            if known is not None and known.family != "listen":
                raise ConfigError(
                    f"endpoint {self.endpoint} serves {known.id}, a {known.family} model, not a listen model: name "
                    "the listen endpoint (--endpoint, OMNI_STUDIO_LISTEN_ENDPOINT), or deploy one with "
                    "`python -m infra deploy --with listen`")
            return self._model

    # -- a file ----------------------------------------------------------------------------------
    def _invoke(self, body: bytes, content_type: str) -> bytes:
        try:
            resp = self.aws.client("sagemaker-runtime").invoke_endpoint(
                EndpointName=self.endpoint, Body=body, ContentType=content_type, Accept="application/json",
                CustomAttributes=route_attribute(TRANSCRIPTIONS_PATH))
            return resp["Body"].read()
        except (bx.BotoCoreError, bx.ClientError) as exc:
            raise aws_error(exc, f"transcribing on listen endpoint {self.endpoint}", profile=self.aws.profile) from None

    def _transcribe(self, name: str, data: bytes, model: str, language: str | None) -> tuple[str, list[Segment]]:
        fmt: TranscriptionFormat = "verbose_json"
        body, ctype = multipart(name, data, TranscriptionForm(model=model, language=language, response_format=fmt))
        try:
            answer = self._invoke(body, ctype)
        except ServerError as exc:
            if VERBOSE_REFUSED not in str(exc):
                raise
            fmt = "json"  # a model that cannot time its text: ask again without segments
            body, ctype = multipart(name, data, TranscriptionForm(model=model, language=language, response_format=fmt))
            answer = self._invoke(body, ctype)
        try:
            parsed = TranscriptionVerbose.model_validate_json(answer)
        except ValidationError:
            raise ServerError(f"listen endpoint {self.endpoint} answered something that is not a transcription: "
                              f"{plain_excerpt(error_text(answer.decode('utf-8', 'replace')) or '', 200)!r}") from None
        segments = [Segment(round(s.start, 3), round(s.end, 3), s.text.strip()) for s in parsed.segments or []]
        return parsed.text.strip(), segments

    def _file(self, audio: ListenAudio, model: str | None, language: str | None) -> Transcript:
        model = model or self.model_id()
        started = time.perf_counter()
        probe, _ = multipart(audio.name, b"", TranscriptionForm(model=model, language=language,
                                                                 response_format="verbose_json"))
        fitting = None
        if len(probe) + len(audio.data) <= self.max_bytes:
            text, segments = self._transcribe(audio.name, audio.data, model, language)
        else:
            pieces = cut_at_silences(audio.pcm, self.max_bytes - len(probe) - MULTIPART_SLACK)
            texts, segments = [], []
            for i, (offset, pcm) in enumerate(pieces):
                try:
                    piece_text, piece_segments = self._transcribe(f"piece-{i + 1}.wav",
                                                                  wav_bytes(pcm, LISTEN_SAMPLE_RATE), model, language)
                except ServerError as exc:
                    raise ServerError(f"piece {i + 1} of {len(pieces)} (from {offset:.1f} s): {exc}") from None
                if piece_text:
                    texts.append(piece_text)
                segments += [Segment(round(s.start + offset, 3), round(s.end + offset, 3), s.text)
                             for s in piece_segments]
            text = " ".join(texts)
            fitting = (f"{audio.name} ({len(audio.data) / 2**20:.1f} MB) is over SageMaker's "
                       f"{self.max_bytes / 2**20:.3g} MB InvokeEndpoint limit: it was cut at silences into "
                       f"{len(pieces)} pieces, each transcribed, and their texts joined")
        elapsed = time.perf_counter() - started
        if not text:
            raise NoSpeech(audio.name)
        return Transcript(text=text, route="file", audio_s=audio.seconds, elapsed_s=elapsed, model=model,
                          target=self.target, segments=segments, fitting=fitting)

    async def transcribe_file(self, audio: ListenAudio, *, model: str | None = None,
                              language: str | None = None) -> Transcript:
        if self.endpoint is None:
            raise missing_endpoint("listen")
        return await asyncio.to_thread(self._file, audio, model, language)

    # -- a stream --------------------------------------------------------------------------------
    async def stream(self, audio: ListenAudio, *, model: str | None = None, language: str | None = None,
                     on_partial: realtime.OnPartial | None = None, pace: bool = True) -> Transcript:
        model, out = await self._stream(audio.pcm, model, language, on_partial, pace)
        return stream_transcript(out, name=audio.name, audio_s=audio.seconds, model=model, target=self.target,
                                 preview=None)

    async def stream_live(self, source: realtime.LiveSource, *, name: str = "microphone", model: str | None = None,
                          language: str | None = None, on_partial: realtime.OnPartial | None = None) -> Transcript:
        model, out = await self._stream(source, model, language, on_partial, True)
        return stream_transcript(out, name=name, audio_s=out.bytes_sent / LISTEN_BYTES_PER_S, model=model,
                                 target=self.target, preview=None)

    async def outcome(self, source: bytes | realtime.LiveSource, *, model: str | None = None,
                      on_partial: realtime.OnPartial | None = None) -> realtime.StreamOutcome:
        """The session's raw outcome (text, first-audio and done times) for a recording or a live source, as
        `realtime.stream_pcm` gives it on a URL: what Converse's pipeline times a turn by."""
        return (await self._stream(source, model, None, on_partial, True))[1]

    async def _stream(self, pcm: bytes | realtime.LiveSource, model: str | None, language: str | None,
                      on_partial: realtime.OnPartial | None, pace: bool) -> tuple[str, realtime.StreamOutcome]:
        """The realtime session over the HTTP/2 bidirectional stream: (the model named, what the stream gave)."""
        if self.endpoint is None:
            raise missing_endpoint("listen")
        model = model or await asyncio.to_thread(self.model_id)
        transport = self._transport(REALTIME_INVOCATION_PATH)
        await transport.connect()
        out = await realtime.stream_on(_Channel(transport), transport.target, pcm, model=model, language=language,
                                       on_partial=on_partial, pace=pace, connect_timeout=transport.connect_timeout,
                                       answer_timeout=self.timeout)
        return model, out


class _Channel:
    """The HTTP/2 stream as the realtime session's channel: text messages in and out."""

    def __init__(self, transport: Any) -> None:
        self.transport = transport

    async def recv(self) -> str:
        for _ in range(100_000):
            message = await self.transport.receive()
            if message is None:
                raise StreamError(f"{self.transport.target} closed the transcription stream before "
                                  "transcription.done")
            if isinstance(message, str):
                return message
        raise StreamError(f"{self.transport.target} sent audio where transcription events were expected")

    async def send(self, text: str) -> None:
        await self.transport.send_text(text)

    async def close(self) -> None:
        await self.transport.close()
