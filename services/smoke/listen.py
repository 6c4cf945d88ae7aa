"""The listen family's smoke check: the voice check's recording when it passed in this run, else the offline
engine's voice saying the same line, sent as a file; passes when text comes back; saves `smoke-transcript.txt`
(its word error rate against the line in the figures)."""

from __future__ import annotations

import asyncio
from typing import Any

from services.smoke import SMOKE_TEXT, VOICE_TIMEOUT_S, SmokeCheck, SmokeContext

LISTEN_FILE = "smoke-transcript.txt"


def smoke_listen(backend: Any, ctx: SmokeContext) -> SmokeCheck:
    """Transcribe a short recording of SMOKE_TEXT as a file; passes when text comes back."""
    from services.listen import load_audio, spoken_sample, word_error_rate

    recording = ctx.made("voice")
    timeout_s = ctx.timeout("listen", VOICE_TIMEOUT_S)
    source = "the voice check's recording" if recording else "the offline engine's voice"
    audio = load_audio(recording or spoken_sample(SMOKE_TEXT), name="smoke speech")
    listener = backend.client("listen")

    async def listen() -> Any:
        return await asyncio.wait_for(listener.transcribe_file(audio), timeout_s)

    try:
        transcript = asyncio.run(listen())
    except TimeoutError:
        return SmokeCheck("listen", False, f"no transcript from {listener.target} within {timeout_s:.0f} s")
    path = ctx.out_dir / LISTEN_FILE
    path.write_text(transcript.text + "\n", encoding="utf-8")
    wer = word_error_rate(SMOKE_TEXT, transcript.text)
    figures = {"audio_s": round(audio.seconds, 3), "rtf": transcript.rtf and round(transcript.rtf, 4),
               "wer": round(wer, 4), "source": source}
    return SmokeCheck("listen", True, f"{len(transcript.text.split())} words from {audio.seconds:.1f} s of "
                                      f"{source} (WER {wer:.0%})", path, len(transcript.text.encode()), figures=figures)
