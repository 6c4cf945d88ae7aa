"""The sound family's client: checks the request, sends it, and checks what comes back — an audio file of the
asked format that decodes to 44.1 kHz stereo of the asked length — and keeps it in the history.

    result = client.generate(SoundRequest("rain on a tin roof", seconds=8, seed=7))
    job = record_sound(client, history, request)     # a "sound" job: sound.<format>, its settings and seed
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from protocol.errors import ServerError, StudioError
from protocol.limits import SOUND_CHANNELS, SOUND_SAMPLE_RATE
from protocol.sound import answer_frames
from services.access import require
from services.sound.request import SoundRequest

if TYPE_CHECKING:
    from services.history import History, Job


@dataclass(frozen=True)
class SoundResult:
    audio: bytes  # the file as the server sent it
    request: SoundRequest  # exactly what was sent, seed included
    sample_rate: int
    channels: int
    seconds: float
    request_s: float
    total_s: float
    preview: str | None = None  # the offline engine's note: what its preview is (None: a model made it)

    @property
    def seed(self) -> int | None:
        return self.request.seed

    def timings(self) -> dict[str, float]:
        return {"request_s": round(self.request_s, 4), "total_s": round(self.total_s, 4)}


def decode_shape(data: bytes, fmt: str) -> tuple[int, int, int]:
    """(sample rate, channels, frames) of an answer in `fmt` (wav, flac or mp3)."""
    import av

    with av.open(io.BytesIO(data)) as container:
        stream = container.streams.audio[0]
        frames = sum(frame.samples for frame in container.decode(stream))
        return stream.rate or stream.codec_context.sample_rate, stream.codec_context.channels, frames


class SoundClient:
    def __init__(self, transport: Any) -> None:
        self.transport = transport

    @property
    def target(self) -> str:
        return self.transport.target

    def generate(self, request: SoundRequest) -> SoundResult:
        t0 = time.perf_counter()
        request = request.validated().with_seed()
        answer = self.transport.generate(request.wire())
        where = f"the sound server at {self.target}"
        try:
            rate, channels, frames = decode_shape(answer.data, request.format)
        except Exception as exc:  # PyAV raises many kinds for bad data
            raise ServerError(f"{where} answered bytes that are not {request.format} audio ({exc})") from None
        want = answer_frames(request.seconds)
        # mp3 and flac round to their frame sizes; the length may differ by a codec frame
        if rate != SOUND_SAMPLE_RATE or channels != SOUND_CHANNELS or abs(frames - want) > 4096:
            raise ServerError(f"{where} answered {frames / max(rate, 1):.2f} s at {rate} Hz, {channels} channel(s); "
                              f"asked for {request.seconds:g} s at {SOUND_SAMPLE_RATE} Hz stereo")
        return SoundResult(answer.data, request, rate, channels, frames / rate, answer.request_s,
                           time.perf_counter() - t0, preview=answer.preview)

    def close(self) -> None:
        self.transport.close()


def record_sound(client: SoundClient, history: History, request: SoundRequest) -> Job:
    """Generate and record: the job row first (running), then the file and timings — or the failure text, so a
    failed attempt stays in the history with its settings. Bad input (or a role that may not generate) raises
    before anything is recorded."""
    require(history.actor, "generate")
    request = request.validated().with_seed()
    job = history.jobs.create("sound", request.prompt, request.params(), target=client.target, status="running")
    try:
        result = client.generate(request)
    except StudioError as exc:
        history.jobs.fail(job.id, str(exc))
        raise
    except Exception as exc:  # a bug must not leave the row "running" forever
        history.jobs.fail(job.id, f"unexpected error: {type(exc).__name__}: {exc}")
        raise
    meta: dict[str, Any] = {"seed": result.seed, "seconds": round(result.seconds, 3), "format": request.format,
                            "sample_rate": result.sample_rate, "channels": result.channels,
                            "preview": result.preview is not None}
    if result.preview:
        meta["preview_note"] = result.preview
    return history.jobs.succeed(job.id, {f"sound.{request.format}": result.audio}, timings=result.timings(), meta=meta)


def waveform(data: bytes) -> bytes:
    """A PNG of a sound file's waveform (its channels mixed), for the page to draw under the player."""
    import av

    from services.speech.audio import waveform_png

    with av.open(io.BytesIO(data)) as container:
        resampler = av.AudioResampler(format="s16", layout="mono")
        pcm = b"".join(bytes(f.planes[0])[: f.samples * 2] for frame in container.decode(audio=0)
                       for f in resampler.resample(frame))
    return waveform_png(pcm, channels=1)
