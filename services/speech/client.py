"""`SpeechClient` opens speech sessions to one target and lists its voices and languages; `SpeechRun` runs one
utterance on the process's background loop so a UI thread can watch it (stats snapshot, audio so far)
without blocking.

    client = omni_client("http://127.0.0.1:8091", settings)
    run = SpeechRun(loop, client, speech_config(voice="joe"), "Hello there.", on_audio=playback.push)
    run.stats().ttfa_ms, run.pcm(), run.result()
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import httpx

from protocol.common import ModelList
from protocol.errors import BackendUnreachable, InvalidInput, ServerError, StudioError
from protocol.speech import (
    QWEN3_TTS_LANGUAGES,
    SPEECH_STREAM_PATH,
    SessionConfig,
    VoicesResponse,
)
from services.speech.session import (
    OnAudio,
    SessionStats,
    SpeechSession,
    Utterance,
    require_text,
)
from services.speech.transport import SpeechTransport
from services.speech.websocket import WebSocketTransport

if TYPE_CHECKING:
    from services.runtime import BackgroundLoop
    from services.settings import Settings


@runtime_checkable
class SpeechCatalog(Protocol):
    """Voices and languages a server offers."""

    def voices(self) -> list[str]: ...
    def languages(self) -> list[str]: ...


# Languages by what serves the voice. vLLM-Omni has no languages route; docs/protocols.md lists Qwen3-TTS's.
OFFLINE_ENGINE_OWNER = "omni-studio-offline"


OFFLINE_LANGUAGES = ["Auto", "English"]


def languages_for_models(models: ModelList) -> list[str]:
    """The language list for a server, from its `/v1/models` (the offline engine speaks English only)."""
    if any(m.owned_by == OFFLINE_ENGINE_OWNER for m in models.data):
        return list(OFFLINE_LANGUAGES)
    if any("qwen3-tts" in m.id.lower() for m in models.data):
        return list(QWEN3_TTS_LANGUAGES)
    return ["Auto"]


class OmniCatalog:
    """`GET /v1/audio/voices` and `GET /v1/models` on a vLLM-Omni server."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _get(self, path: str) -> Any:
        try:
            resp = httpx.get(f"{self.url}{path}", timeout=self.timeout)
        except httpx.HTTPError as exc:
            raise BackendUnreachable(f"cannot reach {self.url} ({type(exc).__name__}: {exc}); is the server running?") from None
        if resp.status_code != 200:
            raise ServerError(f"{self.url}{path} answered HTTP {resp.status_code}: {resp.text[:300]}", status=resp.status_code)
        return resp.json()

    def voices(self) -> list[str]:
        body = VoicesResponse.model_validate(self._get("/v1/audio/voices"))
        uploaded = [v.get("name") if isinstance(v, dict) else str(v) for v in body.uploaded_voices]
        return list(dict.fromkeys([*body.voices, *(u for u in uploaded if u)]))

    def languages(self) -> list[str]:
        return languages_for_models(ModelList.model_validate(self._get("/v1/models")))


class SpeechClient:
    """Opens speech sessions to one target; lists its voices and languages."""

    def __init__(self, transport_factory: Callable[[], SpeechTransport], catalog: SpeechCatalog, *, target: str) -> None:
        self._transport_factory = transport_factory
        self._catalog = catalog
        self.target = target

    def voices(self) -> list[str]:
        return self._catalog.voices()

    def languages(self) -> list[str]:
        return self._catalog.languages()

    def open(self, config: SessionConfig | None = None, *, on_audio: OnAudio | None = None) -> SpeechSession:
        """A session (not yet connected): use `async with client.open(cfg) as session:`."""
        return SpeechSession(self._transport_factory(), config, on_audio=on_audio)

    async def say(self, config: SessionConfig | None, text: str, *, on_audio: OnAudio | None = None,
                  session: SpeechSession | None = None) -> Utterance:
        """Connect, speak `text`, close. Every failure after validation ends up in `Utterance.error`."""
        require_text(text)
        session = session or self.open(config, on_audio=on_audio)
        try:
            async with session:
                return await session.say(text)
        except InvalidInput:
            raise
        except StudioError as exc:  # connect failures: nothing was streamed
            stats = session.snapshot()
            stats.state, stats.error = "failed", str(exc)
            return Utterance(text, session.config.voice, session.config.language, stats, session.recording(), exc)


def omni_client(url: str, settings: Settings | None = None) -> SpeechClient:
    """The native vLLM-Omni speech client: WebSocket `/v1/audio/speech/stream` on `url`."""
    url = url.rstrip("/")
    ws_url = ("wss://" + url[len("https://"):] if url.startswith("https://") else "ws://" + url.removeprefix("http://")) + SPEECH_STREAM_PATH
    connect_timeout = settings.connect_timeout_s if settings is not None else 10.0
    return SpeechClient(
        lambda: WebSocketTransport(ws_url, connect_timeout=connect_timeout),
        OmniCatalog(url, timeout=connect_timeout),
        target=url,
    )


class SpeechRun:
    """One utterance running on the background loop, watched from another thread (the Streamlit script).

    `stats()` and `pcm()` are safe to call at any time; `on_audio` is called on the loop thread the moment
    each chunk arrives (playback pushes there).
    """

    def __init__(self, loop: BackgroundLoop, client: SpeechClient, config: SessionConfig | None, text: str, *,
                 on_audio: OnAudio | None = None) -> None:
        require_text(text)
        self.text = text
        self._loop = loop
        self._session = client.open(config, on_audio=on_audio)
        self._future = loop.submit(client.say(None, text, session=self._session))

    @property
    def done(self) -> bool:
        return self._future.done()

    def stats(self) -> SessionStats:
        return self._session.snapshot()

    def pcm(self) -> bytes:
        return self._session.recording()

    def result(self, timeout: float | None = None) -> Utterance:
        return self._future.result(timeout)

    def cancel(self) -> None:
        self._loop.submit(self._session.cancel())
