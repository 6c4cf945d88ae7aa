"""What evaluations hear: a listen item transcribed by its variant's target, and a voice item's speech sent
through a listen target (its *intelligibility*), each scored against the text that is spoken. The Voice page's
opt-in check and `speak --intelligibility` use the same choice of target (`take_listener`, `offline_listener`),
the same figures (`heard_by`) and the page the one line (`intelligibility_line`).

Scoring is services/listen/wer.py's, one utterance at a time: `words` = the reference's words after its
normalisation, `errors` = its WER × words (substitutions + deletions + insertions, a whole number). A target
that hears no words at all scores every reference word as deleted (WER 1), not as a failure: that is the
measurement. The report sums them into the corpus WER with its bootstrap interval (services/eval/stats.py).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from protocol.errors import InvalidInput, StudioError
from services.listen import Listener, NoSpeech, load_audio, normalise, word_error_rate

# A voice evaluation's listen target when its SPEC names none (`intelligibility = "offline"`).
DEFAULT_INTELLIGIBILITY: dict[str, Any] = {"backend": "offline"}
OFFLINE_LABEL = "the offline engine's recognizer (Whisper tiny.en, English; a stand-in, not Voxtral)"
INTELLIGIBILITY_KEYS = ("backend", "url", "endpoint", "model")


def score(reference: str, text: str) -> dict[str, Any]:
    """`{"errors", "words", "wer"}` of `text` against `reference` (InvalidInput for a reference without words)."""
    words = len(normalise(reference).split())
    wer = word_error_rate(reference, text)
    return {"errors": int(round(wer * words)), "words": words, "wer": wer}


def check_reference(what: str, reference: str) -> None:
    if not normalise(reference).split():
        raise InvalidInput(f"{what}: the reference has no words to compare with: give the text that is spoken")


async def _hear(listener: Listener, data: bytes, name: str, settings: dict[str, Any]) -> tuple[str, Any]:
    audio = load_audio(data, name)
    try:
        if settings.get("route") == "stream":
            t = await listener.stream(audio, model=settings.get("model"), language=settings.get("language"))
        else:
            t = await listener.transcribe_file(audio, model=settings.get("model"), language=settings.get("language"))
    except NoSpeech:
        return "", None
    return t.text, t


def transcribe(listener: Listener | None, data: bytes, name: str, reference: str,
               settings: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """One listen item: the transcript (as the .txt media) and its figures: latency_s, audio_s, rtf, model,
    route, errors, words, wer."""
    if listener is None:
        raise StudioError("its target has no listen route: aim the variant at the offline engine, a server by url "
                          "or a SageMaker listen endpoint")
    started = time.perf_counter()
    text, t = asyncio.run(_hear(listener, data, name, settings))
    figures: dict[str, Any] = {"latency_s": time.perf_counter() - started, **score(reference, text),
                               "route": settings.get("route") or "file"}
    if t is not None:
        figures |= {"audio_s": t.audio_s, "rtf": t.rtf, "model": t.model}
    return (text + "\n").encode("utf-8"), figures


def intelligibility_setting(value: Any) -> dict[str, Any] | None:
    """A voice SPEC's `intelligibility`: "offline" (the default), "none" / false (off), a server's URL, or a
    table of backend / url / endpoint / model. The listen target as a variant's target keys, None when off."""
    if value is None or value is True or value == "offline":
        return dict(DEFAULT_INTELLIGIBILITY)
    if value is False or value == "none":
        return None
    if isinstance(value, str) and value.startswith(("http://", "https://")):
        return {"backend": "server", "url": value}
    if isinstance(value, dict):
        bad = [k for k in value if k not in INTELLIGIBILITY_KEYS]
        if bad or not all(isinstance(v, str) and v.strip() for v in value.values()):
            raise InvalidInput(f"intelligibility: the keys are {', '.join(INTELLIGIBILITY_KEYS)} (texts), not "
                               f"{', '.join(bad) or 'empty values'}")
        out = {k: v.strip() for k, v in value.items()}
        if "url" not in out and "endpoint" not in out:
            out.setdefault("backend", "offline")
        return out
    raise InvalidInput(f"intelligibility must be \"offline\", \"none\", a server's URL or a table (url / endpoint / "
                       f"model), not {value!r}")


def intelligibility_label(setting: dict[str, Any] | None) -> str | None:
    if setting is None:
        return None
    if setting.get("endpoint"):
        where = f"the SageMaker listen endpoint {setting['endpoint']}"
    elif setting.get("url"):
        where = f"the listen server at {setting['url']}"
    else:
        where = OFFLINE_LABEL
    return where + (f", model {setting['model']}" if setting.get("model") else "")


def hear_take(listener: Listener, wav: bytes, text: str, model: str | None = None) -> dict[str, Any]:
    """A voice take's intelligibility: `{"intel_errors", "intel_words", "intel_wer", "intel_transcript"}`, or
    `{"intel_error": why}` when it could not be heard (the take itself stands)."""
    try:
        transcript, figures = transcribe(listener, wav, "the take", text, {"model": model} if model else {})
    except StudioError as exc:
        return {"intel_error": str(exc)}
    return {"intel_errors": figures["errors"], "intel_words": figures["words"], "intel_wer": figures["wer"],
            "intel_transcript": transcript.decode("utf-8").strip()}


def offline_listener(backend: Any) -> Listener:
    """The offline engine's recognizer: the backend's own when it is the offline engine, else the engine this
    process shares (started once, offline.launch)."""
    if backend is not None and backend.name == "offline":
        return backend.client("listen")
    from offline.launch import shared_engine
    from services.listen import OmniListen
    return OmniListen(shared_engine().url)


def take_listener(backend: Any) -> tuple[Listener, str]:
    """The listen target a Voice take is heard by, and its label: the backend's own listen route when it has one,
    else the offline engine's recognizer (a stand-in, labelled so)."""
    listen = backend.client("listen")
    if getattr(listen, "endpoint", "") is None:  # a deployment without its listen endpoint
        return offline_listener(backend), OFFLINE_LABEL
    return listen, OFFLINE_LABEL if backend.name == "offline" else f"the listen route of {listen.target}"


def heard_by(listener: Listener, label: str, wav: bytes, text: str) -> dict[str, Any]:
    """A take's intelligibility as kept with it: `{"wer", "errors", "words", "transcript", "heard_by"}`, or
    `{"error", "heard_by"}` when the recognizer failed (the take stands; anything unforeseen is that failure)."""
    try:
        figures = hear_take(listener, wav, text)
    except Exception as exc:  # noqa: BLE001 — the take and its audio are kept whatever the recognizer does
        figures = {"intel_error": f"{type(exc).__name__}: {exc}"}
    if "intel_error" in figures:
        return {"error": figures["intel_error"], "heard_by": label}
    return {"wer": round(figures["intel_wer"], 4), "errors": figures["intel_errors"], "words": figures["intel_words"],
            "transcript": figures["intel_transcript"], "heard_by": label}


def take_intelligibility(backend: Any, wav: bytes, text: str) -> dict[str, Any]:
    """A Voice take heard by `take_listener(backend)` (see heard_by); a recognizer that cannot start is its error."""
    try:
        listener, label = take_listener(backend)
    except StudioError as exc:
        return {"error": str(exc), "heard_by": OFFLINE_LABEL}
    return heard_by(listener, label, wav, text)


def intelligibility_line(heard: dict[str, Any]) -> str:
    """The one line a take's intelligibility is shown as (the page and the kept takes)."""
    if "error" in heard:
        return f"Intelligibility: not measured — the recognizer failed: {heard['error']} (by {heard['heard_by']})"
    return (f"Intelligibility: WER {heard['wer'] * 100:.1f} % ({heard['errors']} error{'' if heard['errors'] == 1 else 's'} / {heard['words']} words) — heard: "
            f"{heard['transcript']!r} (by {heard['heard_by']})")
