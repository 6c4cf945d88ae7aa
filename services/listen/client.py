"""A listen client per target, over one interface (`Listener`): `transcribe_file` sends the recording to
`POST /v1/audio/transcriptions`, `stream` sends it as a microphone would over `/v1/realtime`. Both return a
`Transcript` with the figures, and raise NoSpeech when the target heard no words.

    listener = OmniListen("http://127.0.0.1:8091")
    transcript = await listener.stream(load_audio(data, "talk.mp3"), on_partial=print)
    transcript.text, transcript.first_partial_ms, transcript.final_ms, transcript.rtf

`OmniListen` speaks vLLM's protocol to any server by URL — the offline engine or a vLLM server serving a
transcription model. Without a model named, it takes the listen model when the server lists it, else the
server's only model (from `GET /v1/models`).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import httpx
from pydantic import ValidationError

from protocol.common import ModelList
from protocol.listen import DEFAULT_LISTEN_MODEL, LISTEN_BYTES_PER_S, REALTIME_PATH
from services.listen import realtime, rest
from services.listen.audio import ListenAudio, NoSpeech
from services.listen.transcript import Transcript


@runtime_checkable
class Listener(Protocol):
    target: str

    async def transcribe_file(self, audio: ListenAudio, *, model: str | None = None,
                              language: str | None = None) -> Transcript: ...

    async def stream(self, audio: ListenAudio, *, model: str | None = None, language: str | None = None,
                     on_partial: realtime.OnPartial | None = None, pace: bool = True) -> Transcript: ...

    async def stream_live(self, source: realtime.LiveSource, *, name: str = "microphone", model: str | None = None,
                          language: str | None = None, on_partial: realtime.OnPartial | None = None) -> Transcript:
        """Stream PCM16 chunks (16 kHz, mono) as a live source yields them (a microphone); the source's end is the
        final commit. NoSpeech (naming `name`) when no words were heard."""
        ...


def stream_transcript(out: realtime.StreamOutcome, *, name: str, audio_s: float, model: str, target: str,
                      preview: str | None, served_by: str | None = None) -> Transcript:
    """A finished stream's Transcript with its figures; NoSpeech when it heard no words."""
    if not out.text:
        raise NoSpeech(name)
    first, last, done = out.first_audio_t, out.last_audio_t, out.done_t
    assert done is not None and first is not None and last is not None
    return Transcript(
        text=out.text, route="stream", audio_s=audio_s, elapsed_s=done - first, model=model,
        target=target, preview=preview, served_by=served_by, partials=out.partials, final_ms=(done - last) * 1000,
        first_partial_ms=None if out.first_partial_t is None else (out.first_partial_t - first) * 1000,
    )


def ws_url_of(url: str) -> str:
    url = url.rstrip("/")
    scheme, rest_ = ("wss://", url[len("https://"):]) if url.startswith("https://") else ("ws://", url.removeprefix("http://"))
    return scheme + rest_ + REALTIME_PATH


class OmniListen:
    """vLLM's two listen routes on one server (see the module's doc)."""

    def __init__(self, url: str, *, timeout: float = 120.0, connect_timeout: float = 10.0) -> None:
        self.target = url.rstrip("/")
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self._cards: dict[str, str | None] | None = None  # model id -> its preview note
        self._served: dict[str, str] = {}  # model id -> what answers for it (a stand-in's own name: the engine's)

    async def _models(self, http: httpx.AsyncClient) -> dict[str, str | None]:
        if self._cards is None:
            try:
                resp = await http.get(self.target + "/v1/models")
            except httpx.HTTPError as exc:
                raise rest.unreachable(self.target, exc) from None
            cards: dict[str, str | None] = {}
            if resp.status_code == 200:
                try:
                    raw = resp.json().get("data", [])
                    models = ModelList.model_validate({"data": raw})
                    cards = {m.id: next((c.get("preview") for c in raw if c.get("id") == m.id), None)
                             for m in models.data}
                    self._served = {str(c["id"]): str(c["served_by"]) for c in raw
                                    if isinstance(c, dict) and c.get("id") and c.get("served_by")}
                except (ValueError, AttributeError, ValidationError):
                    cards = {}
            self._cards = cards
        return self._cards

    async def _model(self, http: httpx.AsyncClient, model: str | None) -> tuple[str, str | None]:
        """The model to name and its preview note (None: the model's own answers)."""
        cards = await self._models(http)
        if model is None:
            model = DEFAULT_LISTEN_MODEL if DEFAULT_LISTEN_MODEL in cards or len(cards) != 1 else next(iter(cards))
        return model, cards.get(model)

    def _http(self) -> httpx.AsyncClient:
        return httpx.AsyncClient(timeout=httpx.Timeout(self.timeout, connect=self.connect_timeout), trust_env=False)

    async def transcribe_file(self, audio: ListenAudio, *, model: str | None = None,
                              language: str | None = None) -> Transcript:
        async with self._http() as http:
            model, preview = await self._model(http, model)
            text, segments, elapsed, note = await rest.transcribe_file(http, self.target, audio, model=model,
                                                                       language=language)
        if not text:
            raise NoSpeech(audio.name)
        return Transcript(text=text, route="file", audio_s=audio.seconds, elapsed_s=elapsed, model=model,
                          target=self.target, segments=segments, preview=note or preview,
                          served_by=self._served.get(model))

    async def stream(self, audio: ListenAudio, *, model: str | None = None, language: str | None = None,
                     on_partial: realtime.OnPartial | None = None, pace: bool = True) -> Transcript:
        async with self._http() as http:
            model, preview = await self._model(http, model)
        out = await realtime.stream_pcm(ws_url_of(self.target), audio.pcm, model=model, language=language,
                                        on_partial=on_partial, pace=pace, connect_timeout=self.connect_timeout,
                                        answer_timeout=self.timeout)
        return stream_transcript(out, name=audio.name, audio_s=audio.seconds, model=model, target=self.target,
                                 preview=preview, served_by=self._served.get(model))

    async def stream_live(self, source: realtime.LiveSource, *, name: str = "microphone", model: str | None = None,
                          language: str | None = None, on_partial: realtime.OnPartial | None = None) -> Transcript:
        async with self._http() as http:
            model, preview = await self._model(http, model)
        out = await realtime.stream_pcm(ws_url_of(self.target), source, model=model, language=language,
                                        on_partial=on_partial, connect_timeout=self.connect_timeout,
                                        answer_timeout=self.timeout)
        return stream_transcript(out, name=name, audio_s=out.bytes_sent / LISTEN_BYTES_PER_S, model=model,
                                 target=self.target, preview=preview, served_by=self._served.get(model))
