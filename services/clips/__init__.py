"""Finished clips: a generated video with a narration and a soundtrack muxed in, the video's packets copied as
they are. UI-free and target-free: it takes sounds and a video someone else made (the engine, a server, a file).

- clip.py    make_clip (the one entry point), ClipResult; the AAC encode and the MP4 write
- audio.py   Audio (samples and a rate), the sources a part may be given as, decoding with PyAV, 48 kHz stereo by soxr
- mix.py     the soundtrack looped or cut and faded, ducked under the narration, the mix kept from clipping
- video.py   the source video's packets, read once, and the hold of its last frame
- errors.py  ClipError: each message names the file, the part or the option to fix

    from services.clips import Audio, make_clip
    result = make_clip(Path("take.mp4"), Path("clip.mp4"), narration=Path("voice.wav"),
                       soundtrack=Path("music.mp3"), duck_db=12.0, fit="trim")
"""

from services.clips.audio import TRACK_RATE, Audio, AudioSource, LoadedAudio, load_audio, to_track_format
from services.clips.clip import FITS, ClipResult, Fit, make_clip
from services.clips.errors import ClipError

__all__ = [
    "FITS", "TRACK_RATE", "Audio", "AudioSource", "ClipError", "ClipResult", "Fit", "LoadedAudio", "load_audio",
    "make_clip", "to_track_format",
]
