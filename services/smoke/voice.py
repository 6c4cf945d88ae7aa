"""The voice family's smoke check: one streamed utterance; passes with `audio.start`, `audio.done` and more than
2 000 bytes of PCM; saves `validation-output.wav`. It asks for the task type the voice model serves
(`ctx.voice_task`): a preset voice (CustomVoice), a voice from a description (VoiceDesign), or a clone (Base) of a
synthetic voiced reference — the smoke test has no recording of a person, and needs none to show the model speaks."""

from __future__ import annotations

import asyncio
from typing import Any

from services.smoke import MIN_AUDIO_BYTES, SMOKE_TEXT, VOICE_TIMEOUT_S, SmokeCheck, SmokeContext

VOICE_FILE = "validation-output.wav"
SMOKE_VOICE_DESCRIPTION = "A calm adult voice, clear and even, speaking at a moderate pace."
SMOKE_REFERENCE_SECONDS = 4.0


def smoke_reference_wav(seconds: float = SMOKE_REFERENCE_SECONDS) -> bytes:
    """A voiced, speech-like reference for the Base (clone) smoke test: a gliding 110–150 Hz pitch, harmonics
    shaped by the formants of an open vowel, four syllables a second, peaks at -6 dBFS; mono 24 kHz WAV.
    Not a person's voice: no recording ships with the studio, and the speaker encoder takes any voiced sound."""
    import numpy as np

    from protocol.limits import PCM_SAMPLE_RATE
    from services.speech import wav_bytes

    t = np.arange(int(seconds * PCM_SAMPLE_RATE)) / PCM_SAMPLE_RATE
    f0 = 130 + 20 * np.sin(2 * np.pi * 0.4 * t)
    phase = 2 * np.pi * np.cumsum(f0) / PCM_SAMPLE_RATE
    signal = np.zeros_like(t)
    for k in range(1, 30):
        freq = k * 130.0
        weight = sum(a * np.exp(-(((freq - f) / bw) ** 2)) for f, bw, a in ((700, 130, 1.0), (1220, 160, 0.6),
                                                                            (2600, 250, 0.25)))
        signal += (weight + 0.02) / k * np.sin(k * phase)
    syllables = np.clip(np.sin(2 * np.pi * 2.0 * t), 0, None) ** 0.6  # four a second, with short gaps
    signal *= syllables
    signal *= 0.5 / np.max(np.abs(signal))
    return wav_bytes((signal * 32767).astype("<i2").tobytes())


def _voice_config(task_type: str | None) -> tuple[dict[str, Any], str]:
    """The session.config fields for the model's task type, and how the detail line names it."""
    if task_type == "VoiceDesign":
        return {"task_type": "VoiceDesign", "instructions": SMOKE_VOICE_DESCRIPTION}, "VoiceDesign (a described voice)"
    if task_type == "Base":
        import base64

        data_url = "data:audio/wav;base64," + base64.b64encode(smoke_reference_wav()).decode("ascii")
        return ({"task_type": "Base", "ref_audio": data_url, "x_vector_only_mode": True},
                f"Base (cloned from a synthetic {SMOKE_REFERENCE_SECONDS:.0f} s reference)")
    if task_type == "CustomVoice":
        return {"task_type": "CustomVoice"}, "CustomVoice (a preset voice)"
    return {}, ""


def smoke_voice(backend: Any, ctx: SmokeContext) -> SmokeCheck:
    """One streamed utterance in the task type the voice model serves (see the module's doc)."""
    from protocol.speech import AudioDone, AudioStart, ErrorEvent
    from services.speech import PcmChunk, speech_config

    task_type = ctx.voice_task
    timeout_s = ctx.timeout("voice", VOICE_TIMEOUT_S)
    extra, task_label = _voice_config(task_type)

    seen: dict[str, int] = {"audio.start": 0, "audio.done": 0, "chunks": 0}
    errors: list[str] = []

    async def speak() -> tuple[bytes, dict[str, Any]]:
        session = backend.client("voice").open(speech_config(**extra))
        async with session:
            async for event in session.speak(SMOKE_TEXT):
                if isinstance(event, AudioStart):
                    seen["audio.start"] += 1
                elif isinstance(event, AudioDone):
                    seen["audio.done"] += 1
                elif isinstance(event, PcmChunk):
                    seen["chunks"] += 1
                elif isinstance(event, ErrorEvent):
                    errors.append(event.message)
            return session.wav(), session.snapshot().figures()

    try:
        wav, figures = asyncio.run(asyncio.wait_for(speak(), timeout_s))
    except TimeoutError:
        return SmokeCheck("voice", False, f"no complete utterance from {backend.client('voice').target} within {timeout_s:.0f} s")
    pcm_bytes = int(figures.get("bytes") or 0)
    path = ctx.out_dir / VOICE_FILE
    if wav and pcm_bytes:
        path.write_bytes(wav)  # kept even when the check fails: the audio that did arrive
    missing = [m for m in ("audio.start", "audio.done") if not seen[m]]
    problems = []
    if missing:
        problems.append("no " + " and no ".join(missing))
    if pcm_bytes <= MIN_AUDIO_BYTES:
        problems.append(f"only {pcm_bytes} bytes of audio (needs more than {MIN_AUDIO_BYTES})")
    if errors:
        problems.append("server error: " + "; ".join(errors))
    figures = {**figures, **{k.replace(".", "_"): v for k, v in seen.items()}}
    if task_type:
        figures["task_type"] = task_type
        problems = [f"{task_label}: {problems[0]}", *problems[1:]] if problems else problems
    if problems:
        return SmokeCheck("voice", False, ", ".join(problems), path if pcm_bytes else None, pcm_bytes, figures=figures)
    return SmokeCheck("voice", True, (f"{task_label}: " if task_label else "") +
                      f"{seen['chunks']} chunks, {pcm_bytes} bytes of PCM, first audio "
                      f"{figures.get('ttfa_ms')} ms; saved {path.name}", path, pcm_bytes, figures=figures)
