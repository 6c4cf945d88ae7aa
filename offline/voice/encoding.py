"""The voice's PCM (24 kHz s16le mono) as a whole file of the format a request asks for."""

from __future__ import annotations


import numpy as np

from offline.decoding import encode_pcm
from protocol.audio import wav_bytes
from protocol.limits import PCM_SAMPLE_RATE

MEDIA_TYPES = {"wav": "audio/wav", "pcm": "audio/pcm", "flac": "audio/flac", "mp3": "audio/mpeg", "opus": "audio/ogg"}
_AV_FORMATS = {"flac": ("flac", "flac"), "mp3": ("mp3", "libmp3lame"), "opus": ("ogg", "libopus")}


def encode_audio(pcm: bytes, response_format: str) -> bytes:
    """A whole file of `response_format` holding the 24 kHz s16le mono `pcm`."""
    if response_format == "pcm":
        return pcm
    if response_format == "wav":
        return wav_bytes(pcm)
    if response_format in _AV_FORMATS:
        return _encode_with_av(pcm, *_AV_FORMATS[response_format])
    raise ValueError(f"Unsupported response_format '{response_format}'; use one of: {', '.join(MEDIA_TYPES)}")


def _encode_with_av(pcm: bytes, container: str, codec: str) -> bytes:
    return encode_pcm(np.frombuffer(pcm, dtype="<i2"), rate=PCM_SAMPLE_RATE, channels=1, container=container,
                      codec=codec)
