"""Listen: speech recognition on any target that speaks vLLM's listen routes (docs/listen.md).

- audio.py       load_audio(bytes, name) -> ListenAudio: any PyAV format, checked (≤ 25 MB, audio, not silent)
                 and made 16 kHz mono PCM16 with soxr; NoSpeech
- client.py      Listener (the interface), OmniListen (a vLLM-protocol server by URL, the offline engine too):
                 transcribe_file(audio) over POST /v1/audio/transcriptions, stream(audio, on_partial=) over
                 /v1/realtime paced at real time, stream_live(source) from a live source of PCM chunks (a
                 microphone; realtime.queue_source makes one of an asyncio.Queue)
- transcript.py  Transcript and Segment: the text, segments and figures; .figures() and .render(suffix)
- realtime.py    the /v1/realtime session; rest.py the multipart upload
- wer.py         word_error_rate(reference, hypothesis) after one stated normalisation
- sagemaker.py   SageMakerListen: a SageMaker listen endpoint (InvokeEndpoint files, cut to fit 6 MB; the HTTP/2
                 bidirectional stream)
- live.py        LiveListening: a microphone's frames (any rate and layout) resampled to 16 kHz mono and fed live
                 into stream_live on a background loop; partial text and the result read from the page's thread
- sample.py      spoken_sample(text): the offline engine's voice saying it (the infra smoke test's speech)

A backend's listener is `backend.client("listen")`.
"""

from protocol.listen import TranscriptionUnsupported
from services.listen.audio import ListenAudio, NoSpeech, load_audio
from services.listen.client import Listener, OmniListen
from services.listen.live import MICROPHONE, LiveListening
from services.listen.sample import spoken_sample
from services.listen.transcript import OUT_SUFFIXES, Segment, Transcript
from services.listen.wer import WerCounts, normalise, wer_counts, word_error_rate

__all__ = [
    "MICROPHONE", "OUT_SUFFIXES", "ListenAudio", "Listener", "LiveListening", "NoSpeech", "OmniListen", "Segment", "Transcript",
    "TranscriptionUnsupported", "WerCounts", "load_audio", "normalise", "spoken_sample", "wer_counts",
    "word_error_rate",
]
