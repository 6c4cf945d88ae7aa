"""`SpeechClient` opens speech sessions to one target and lists its voices and languages; `SpeechRun` runs one
utterance on the process's background loop so a UI thread can watch it (stats snapshot, audio so far)
without blocking.

    client = omni_client("http://127.0.0.1:8091", settings)
    run = SpeechRun(loop, client, speech_config(voice="joe"), "Hello there.", on_audio=playback.push)
    run.stats().ttfa_ms, run.pcm(), run.result()

A UI gives each run to `SpeechRuns` under the id of the browser session that started it, so a run whose
session is gone (the tab closed or reloaded: nobody can press Stop any more) is cancelled instead of
streaming to nobody until its text ends.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import httpx

from protocol.common import ModelList, error_text
from protocol.errors import BackendUnreachable, InvalidInput, ServerError, StudioError
from protocol.speech import (
    OFFLINE_TASK_TYPES,
    QWEN3_TTS_LANGUAGES,
    SPEECH_STREAM_PATH,
    SessionConfig,
    TaskType,
    models_for_task,
    task_types_for_model,
)
from protocol.voices import VOICES_PATH, VoicesResponse
from services.access import Principal, require
from services.speech.events import OnAudio, Utterance
from services.speech.recording import SessionStats
from services.speech.session import SpeechSession
from services.speech.text import speakable
from services.speech.transport import SpeechTransport
from services.speech.websocket import WebSocketTransport

if TYPE_CHECKING:
    from services.runtime import BackgroundLoop
    from services.settings import Settings

log = logging.getLogger(__name__)


@runtime_checkable
class SpeechCatalog(Protocol):
    """Voices and languages a server offers.

    A catalog may also say what its model can do — `task_types()`, `model_id()`, `deploy_hint(models)` (how to
    get a model that can) — and set `lists_saved_voices` when its `voices()` include the saved (uploaded) ones.
    """

    def voices(self) -> list[str]: ...
    def languages(self) -> list[str]: ...


# What each task type does, in the words the messages use.
TASK_WORDS: dict[str, str] = {
    "CustomVoice": "preset voices with style instructions",
    "VoiceDesign": "a voice designed from a description",
    "Base": "cloning a voice from a reference recording",
}


# Languages by what serves the voice. vLLM-Omni has no languages route; docs/protocols.md lists Qwen3-TTS's.
OFFLINE_ENGINE_OWNER = "omni-studio-offline"


# The offline engine accepts every Qwen3-TTS language, as the model does, and speaks each with its English voice.
OFFLINE_LANGUAGES = list(QWEN3_TTS_LANGUAGES)


def languages_for_models(models: ModelList) -> list[str]:
    """The language list for a server, from its `/v1/models`."""
    if any(m.owned_by == OFFLINE_ENGINE_OWNER for m in models.data):
        return list(OFFLINE_LANGUAGES)
    if any("qwen3-tts" in m.id.lower() for m in models.data):
        return list(QWEN3_TTS_LANGUAGES)
    return ["Auto"]


def task_types_for_models(models: ModelList) -> tuple[TaskType, ...]:
    """What a server's voice can do, from its `/v1/models`: the offline engine previews every task type; a
    vLLM-Omni server what its models serve (protocol.speech.VOICE_MODELS; an unknown model: preset voices)."""
    if any(m.owned_by == OFFLINE_ENGINE_OWNER for m in models.data):
        return OFFLINE_TASK_TYPES
    found: dict[TaskType, None] = {}
    for m in models.data:
        found.update(dict.fromkeys(task_types_for_model(m.id)))
    return tuple(found) or ("CustomVoice",)


class OmniCatalog:
    """`GET /v1/audio/voices` and `GET /v1/models` on a vLLM-Omni server."""

    lists_saved_voices = True

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _get(self, path: str) -> Any:
        try:
            resp = httpx.get(f"{self.url}{path}", timeout=self.timeout)
        except httpx.HTTPError as exc:
            raise BackendUnreachable(f"cannot reach {self.url} ({type(exc).__name__}: {exc}); is the server running?") from None
        if resp.status_code != 200:
            raise ServerError(f"{self.url}{path} answered HTTP {resp.status_code}"
                              + (f": {text}" if (text := error_text(resp.text)) else ""), status=resp.status_code)
        return resp.json()

    def voices(self) -> list[str]:
        body = VoicesResponse.model_validate(self._get(VOICES_PATH))
        return list(dict.fromkeys([*body.voices, *(v.name for v in body.uploaded_voices if v.name)]))

    def languages(self) -> list[str]:
        return languages_for_models(ModelList.model_validate(self._get("/v1/models")))

    def task_types(self) -> tuple[TaskType, ...]:
        return task_types_for_models(ModelList.model_validate(self._get("/v1/models")))

    def model_id(self) -> str:
        ids = [m.id for m in ModelList.model_validate(self._get("/v1/models")).data]
        return next((i for i in ids if "tts" in i.lower()), ids[0] if ids else "no model")

    def deploy_hint(self, models: list[str]) -> str:
        return (f"serve one of them at {self.url} (e.g. `vllm serve {models[-1]} --omni`), or use the offline engine, "
                "which previews every task type")


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

    def task_types(self) -> tuple[TaskType, ...]:
        """What the target's voice model can do (CustomVoice, VoiceDesign, Base); a page offers only these."""
        task_types = getattr(self._catalog, "task_types", None)
        return tuple(task_types()) if callable(task_types) else ("CustomVoice",)

    def note(self) -> str | None:
        """What the catalog could not read (e.g. the model behind a SageMaker endpoint, without DescribeEndpoint):
        one line to show beside the voices, which are then offered unchecked."""
        self.task_types()  # the catalog reads what it can on first use
        return getattr(self._catalog, "problem", None)

    def require_task_type(self, task_type: TaskType) -> None:
        """InvalidInput naming the model to deploy (and how) unless the target's model can do `task_type` (sent as
        asked when the model cannot be read: the server says whether it can)."""
        have = self.task_types()
        if task_type in have or getattr(self._catalog, "problem", None):
            return
        model_id = getattr(self._catalog, "model_id", None)
        serves = f"{self.target} serves {model_id()}" if callable(model_id) else f"{self.target} serves a model"
        needed = models_for_task(task_type)
        hint = getattr(self._catalog, "deploy_hint", None)
        how = hint(needed) if callable(hint) else f"serve one of them at {self.target}"
        raise InvalidInput(f"{serves}, which can do {', '.join(have)} only, not {task_type} "
                           f"({TASK_WORDS.get(task_type, task_type)}): that needs {' or '.join(needed)}; {how}")

    def check(self, config: SessionConfig) -> SessionConfig:
        """`config` if the target can speak it: its task type is one the model has, and a saved voice named for
        cloning exists (where the server lists them). Else InvalidInput saying what to deploy or save."""
        task_type: TaskType = config.task_type or ("Base" if config.ref_audio else "CustomVoice")
        self.require_task_type(task_type)
        if (task_type == "Base" and config.voice and not config.ref_audio
                and getattr(self._catalog, "lists_saved_voices", False)):
            names = {v.lower() for v in self._catalog.voices()}
            if config.voice.lower() not in names:
                raise InvalidInput(f"there is no saved voice {config.voice!r} on {self.target}: save it first "
                                   "(`python -m services voices add`), or give a reference recording")
        return config

    def open(self, config: SessionConfig | None = None, *, on_audio: OnAudio | None = None) -> SpeechSession:
        """A session (not yet connected): use `async with client.open(cfg) as session:`."""
        return SpeechSession(self._transport_factory(), config, on_audio=on_audio)

    async def say(self, config: SessionConfig | None, text: str, *, on_audio: OnAudio | None = None,
                  session: SpeechSession | None = None) -> Utterance:
        """Connect, speak `text`, close. Every failure after validation ends up in `Utterance.error`.
        The text is checked here (`speakable`) unless the caller checked it already."""
        text = speakable(text)
        session = session or self.open(config, on_audio=on_audio)
        try:
            async with session:
                return await session.say(text)
        except InvalidInput:
            raise
        except StudioError as exc:  # connect failures: nothing was streamed
            stats = session.snapshot()
            stats.state, stats.error = "failed", str(exc)
            return Utterance(str(text), session.config.voice, session.config.language, stats, session.recording(), exc)


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
        self.text = text = speakable(text)  # the one check of the UI's request; the layers below rely on it
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


class SpeechRuns:
    """The running utterances of a process's UI sessions, one per session, each ending with its session.

    `is_alive(session_id)` says whether a session can still watch and stop its run (the UI knows; this
    layer does not). While runs are registered, a sweep on the background loop asks it every `sweep_s`;
    a run whose session has not been alive for `grace_s` (a connection that drops and comes back within
    it keeps its run) is cancelled: its stream closes, so the server stops generating, and the audio so
    far stays in the run. Finished runs are forgotten. Thread-safe.
    """

    def __init__(self, loop: BackgroundLoop, is_alive: Callable[[str], bool], *, sweep_s: float = 1.0,
                 grace_s: float = 5.0) -> None:
        self._loop = loop
        self._is_alive = is_alive
        self.sweep_s = sweep_s
        self.grace_s = grace_s
        self._runs: dict[str, SpeechRun] = {}
        self._gone_since: dict[str, float] = {}
        self._lock = threading.Lock()
        self._sweeper: concurrent.futures.Future[None] | None = None

    def start(self, session_id: str, client: SpeechClient, config: SessionConfig | None, text: str, *,
              actor: Principal, on_audio: OnAudio | None = None) -> SpeechRun:
        """A new run for `session_id` (a run the session still had is cancelled: one voice per session).
        Forbidden, before anything is sent, unless `actor` may generate."""
        require(actor, "generate")
        run = SpeechRun(self._loop, client, config, text, on_audio=on_audio)
        with self._lock:
            previous = self._runs.get(session_id)
            self._runs[session_id] = run
            self._gone_since.pop(session_id, None)
            if self._sweeper is None or self._sweeper.done():
                self._sweeper = self._loop.submit(self._sweep_while_running())
        if previous is not None and not previous.done:
            previous.cancel()
        return run

    def get(self, session_id: str) -> SpeechRun | None:
        """The session's run while it is registered (until it finishes or is cancelled for a gone session)."""
        with self._lock:
            return self._runs.get(session_id)

    def __len__(self) -> int:
        with self._lock:
            return len(self._runs)

    def sweep(self) -> list[str]:
        """Forget finished runs; cancel those whose session is gone for `grace_s`. The sessions cancelled."""
        now = time.monotonic()
        with self._lock:
            runs = list(self._runs.items())
        cancelled = []
        for session_id, run in runs:
            if not run.done:
                try:
                    alive = self._is_alive(session_id)
                except Exception:  # cannot tell: keep the run (its text ends it in any case)
                    log.exception("cannot tell whether session %s is alive", session_id)
                    alive = True
                if alive:
                    with self._lock:
                        self._gone_since.pop(session_id, None)
                    continue
                with self._lock:
                    gone_for = now - self._gone_since.setdefault(session_id, now)
                if gone_for < self.grace_s:
                    continue
                log.info("session %s is gone: cancelling its speech run", session_id)
                run.cancel()
                cancelled.append(session_id)
            with self._lock:
                if self._runs.get(session_id) is run:
                    del self._runs[session_id]
                    self._gone_since.pop(session_id, None)
        return cancelled

    def close(self) -> list[SpeechRun]:
        """Stop sweeping and cancel every registered run; the runs (their `result()` says when each ended)."""
        with self._lock:
            runs, self._runs = list(self._runs.values()), {}
            self._gone_since.clear()
            sweeper, self._sweeper = self._sweeper, None
        if sweeper is not None:
            sweeper.cancel()
        for run in runs:
            if not run.done:
                run.cancel()
        return runs

    async def _sweep_while_running(self) -> None:
        while True:
            await asyncio.sleep(self.sweep_s)
            self.sweep()
            with self._lock:
                if not self._runs:  # start() makes a new sweeper for the next run
                    self._sweeper = None
                    return
