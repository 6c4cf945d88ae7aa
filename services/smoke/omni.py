"""The omni family's smoke check: a one-turn native conversation — vLLM-Omni's duplex session
(`/v1/realtime?duplex=1`; on SageMaker over the HTTP/2 bidirectional stream) held by services/converse/native.py with
a short recorded turn (the voice check's recording when it passed in this run, else the offline engine's voice
saying a short sentence); passes when the session opens and a transcript and a reply with the agent's audio come
back; saves `smoke-conversation.wav` (the person left, the agent right). A failure names what did not come: the
session (refused, or no duplex session: vLLM-Omni's `unsupported`), the transcript, the reply audio, or the time."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

from protocol.errors import BackendUnreachable, StudioError
from services.smoke import MIN_AUDIO_BYTES, OMNI_TIMEOUT_S, SmokeCheck, SmokeContext

if TYPE_CHECKING:
    from services.converse.native import SessionOpener

OMNI_FILE = "smoke-conversation.wav"
SMOKE_TURN_TEXT = "Hello! What time do you open today?"  # the turn when there is no voice recording


def smoke_omni(backend: Any, ctx: SmokeContext) -> SmokeCheck:
    """The check as the smoke run calls it: at the run's opener (a SageMaker endpoint's stream), else the
    backend's own URL."""
    return smoke_session(ctx.duplex or ctx.url, ctx.out_dir, recording=ctx.made("voice"),
                         timeout_s=ctx.timeout("omni", OMNI_TIMEOUT_S), what=ctx.label)


def smoke_session(session: str | SessionOpener | None, out_dir: Path, *, recording: bytes | None = None,
                  timeout_s: float = OMNI_TIMEOUT_S, what: str = "this target") -> SmokeCheck:
    """One turn of a native conversation (see the module's doc) at `session`: a server's URL or an opener."""
    from services.converse.native import Native, NoDuplexSession
    from services.listen import load_audio, spoken_sample

    if session is None:
        return SmokeCheck("omni", False, f"{what} has no omni endpoint to hold a speech-to-speech session with")
    source = "the voice check's recording" if recording else "the offline engine's voice"
    audio = load_audio(recording or spoken_sample(SMOKE_TURN_TEXT), name="smoke turn")
    native = Native(session, reply_label="the omni endpoint's speech-to-speech session")
    where = native.url
    try:
        conv = asyncio.run(asyncio.wait_for(native.run([audio]), timeout_s))
    except TimeoutError:
        return SmokeCheck("omni", False, f"timed out: no complete turn from {where} within {timeout_s:.0f} s")
    except NoDuplexSession:
        return SmokeCheck("omni", False, f"session refused: {where} has no speech-to-speech session (it answered "
                                         "vLLM-Omni's `unsupported` to the duplex session.update)")
    except BackendUnreachable as exc:
        return SmokeCheck("omni", False, f"no session: {exc}")
    except StudioError as exc:
        return SmokeCheck("omni", False, f"session refused: {exc}")
    return _omni_outcome(conv, out_dir, audio.seconds, source)


def _omni_outcome(conv: Any, out_dir: Path, audio_s: float, source: str) -> SmokeCheck:
    """The omni check's verdict on the one-turn conversation `conv` (services.converse.timeline.Conversation)."""
    turn = conv.turns[0] if conv.turns else None
    agent_bytes = sum(len(pcm) for _, pcm, _ in conv.agent)
    path, saved = out_dir / OMNI_FILE, None
    if conv.person:
        path.write_bytes(conv.stereo_wav())  # kept even when the check fails: what was said and what came back
        saved = path
    figures: dict[str, Any] = {"source": source, "audio_s": round(audio_s, 3), "agent_audio_bytes": agent_bytes}
    if turn is not None:
        figures |= {k: v for k, v in turn.as_json().items() if k in (
            "user_text", "reply_text", "transcript_final_s", "reply_first_token_s", "first_audio_s",
            "voice_to_voice_ms", "error")}
    if turn is None or not turn.user_text:
        why = turn.error if turn is not None and turn.error else f"no words heard in {audio_s:.1f} s of {source}"
        return SmokeCheck("omni", False, f"no transcript: {why}", saved, agent_bytes, figures=figures)
    if agent_bytes <= MIN_AUDIO_BYTES:
        got = f"the reply's text came ({turn.reply_text.strip()!r}) but " if turn.reply_text.strip() else ""
        why = f"; {turn.error}" if turn.error else ""
        return SmokeCheck("omni", False, f"no reply audio: heard {turn.user_text!r}; {got}only {agent_bytes} bytes "
                                         f"of the agent's audio (needs more than {MIN_AUDIO_BYTES}){why}",
                          saved, agent_bytes, figures=figures)
    if turn.error:
        return SmokeCheck("omni", False, f"reply cut short after {agent_bytes} bytes of the agent's audio: "
                                         f"{turn.error}", saved, agent_bytes, figures=figures)
    reply = f"replied {turn.reply_text.strip()!r}" if turn.reply_text.strip() else "replied (no transcript of it)"
    return SmokeCheck("omni", True, f"one turn from {source}: heard {turn.user_text!r}, {reply} with {agent_bytes} "
                                    f"bytes of the agent's audio, voice-to-voice {turn.voice_to_voice_ms:.0f} ms; "
                                    f"saved {path.name}", path, agent_bytes, figures=figures)
