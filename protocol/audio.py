"""WAV, the one container every side writes: a whole file with the stdlib's `wave`, or the header of a stream
whose length is not known yet (as vLLM-Omni streams WAV)."""

from __future__ import annotations

import io
import struct
import wave

from protocol.limits import PCM_CHANNELS, PCM_SAMPLE_RATE, PCM_SAMPLE_WIDTH

_UNKNOWN_SIZE = 0xFFFFFFFF  # a streamed WAV's RIFF and data sizes


def wav_bytes(pcm: bytes, rate: int = PCM_SAMPLE_RATE, channels: int = PCM_CHANNELS,
              width: int = PCM_SAMPLE_WIDTH) -> bytes:
    """Little-endian PCM of `width` bytes a sample wrapped in a WAV file (a trailing partial frame, from a cut
    stream, is dropped)."""
    frame = width * channels
    usable = len(pcm) - len(pcm) % frame
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(width)
        w.setframerate(rate)
        w.writeframes(pcm[:usable])
    return buf.getvalue()


def wav_stream_header(rate: int = PCM_SAMPLE_RATE, channels: int = PCM_CHANNELS,
                      width: int = PCM_SAMPLE_WIDTH) -> bytes:
    """A WAV header for audio of unknown length (sizes 0xFFFFFFFF), as vLLM-Omni streams WAV; `wave` cannot
    write one, since it seeks back to fill the sizes in."""
    return struct.pack(
        "<4sI4s4sIHHIIHH4sI",
        b"RIFF", _UNKNOWN_SIZE, b"WAVE", b"fmt ", 16, 1, channels, rate, rate * channels * width,
        channels * width, width * 8, b"data", _UNKNOWN_SIZE,
    )
