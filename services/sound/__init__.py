"""The sound family (Stable Audio Open through vLLM-Omni's `POST /v1/audio/generate`): a prompt in, a 44.1 kHz
stereo clip out — its request, transports, client and what the history keeps of it.

    client.generate(SoundRequest("rain on a tin roof", seconds=8, seed=7))   # SoundResult (bytes, seconds, seed)
    record_sound(client, history, request)                                    # the same, kept as a "sound" job
"""

from services.sound.client import SoundClient, SoundResult, decode_shape, record_sound, waveform
from services.sound.request import DEFAULT_SECONDS, SoundRequest

__all__ = ["DEFAULT_SECONDS", "SoundClient", "SoundRequest", "SoundResult", "decode_shape", "record_sound", "waveform"]
