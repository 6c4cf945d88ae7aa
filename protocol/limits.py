"""Every limit of the wire and of the studio's inputs, each number defined once.

The wire models (protocol.*), the clients' request checks (services), the offline engine, the emulator and
the pages' widgets (min/max) all read these names, so a limit changes in one place. Sources are in
docs/protocols.md.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from protocol.errors import InvalidInput


class Range(NamedTuple):
    """An inclusive range of allowed values."""

    lo: float
    hi: float

    def __contains__(self, value: object) -> bool:  # type: ignore[override]
        return isinstance(value, int | float) and self.lo <= value <= self.hi

    def check(self, name: str, value: Any, *, integer: bool = True, hint: str = "") -> None:
        """InvalidInput naming `name` unless `value` is a number (whole, unless `integer=False`) in the range."""
        ok_type = isinstance(value, int) if integer else isinstance(value, int | float)
        if isinstance(value, bool) or not ok_type or not (self.lo <= value <= self.hi):
            kind = "a whole number" if integer else "a number"
            extra = f" ({hint})" if hint else ""
            raise InvalidInput(f"{name} must be {kind} from {_num(self.lo)} to {_num(self.hi)}{extra}; got {value!r}")


def _num(x: float) -> str:
    """A limit as a person reads it: 4294967295, not 4.29497e+09; 0.5 stays 0.5."""
    return str(int(x)) if float(x).is_integer() else f"{x:g}"


# -- speech ---------------------------------------------------------------------------------------------
PCM_SAMPLE_RATE = 24_000  # Hz; streamed PCM is s16le mono at this rate
PCM_SAMPLE_WIDTH = 2  # bytes per sample
PCM_CHANNELS = 1
MAX_INPUT_TEXT_MESSAGE_BYTES = 128 * 1024  # per input.text message
MAX_CONFIG_MESSAGE_BYTES = 4 * 1024 * 1024  # session.config may carry ref_audio
CONFIG_TIMEOUT_S = 10.0  # session.config must arrive within this
IDLE_TIMEOUT_S = 30.0  # between messages
SPEED = Range(0.25, 4.0)
REFERENCE_AUDIO_SECONDS = Range(3.0, 30.0)  # a voice-clone reference: shorter is too little voice, longer is refused
VOICE_SAMPLE_MAX_BYTES = 10 * 1024 * 1024  # POST /v1/audio/voices `audio_sample` (vLLM-Omni's cap)
INSTRUCTIONS_MAX_CHARS = 500  # style instructions / a voice description (vLLM-Omni's cap)
FIRST_CHUNK_FRAMES = Range(1, 64)  # initial_codec_chunk_frames the studio offers: smaller = earlier first audio
# A unit of speech (and each piece the offline voice synthesises in one model run) holds at most this many words,
# and at most this many characters (a single giant "word" is cut at the character cap). Text with no punctuation
# is otherwise one unit: measured on the offline engine's Piper voice, 200 unpunctuated words took 15-23 s to
# the first audio and grew the engine by 1.7-3 GB that onnxruntime never returns; 20 words take under a second and
# about 160 MB. The Converse pipeline feeds a reply's text to the speech session by the same caps
# (docs/protocols.md, "Speech stream").
SPEECH_UNIT_MAX_WORDS = 20
SPEECH_UNIT_MAX_CHARS = 200

# -- listen (speech recognition) ------------------------------------------------------------------------
# An audio file sent to POST /v1/audio/transcriptions: vLLM refuses more ("Maximum file size exceeded",
# VLLM_MAX_AUDIO_CLIP_FILESIZE_MB = 25, counted in MiB). The studio reads at most this much of a file to listen
# to, streamed or not.
TRANSCRIPTION_FILE_MAX_BYTES = 25 * 1024 * 1024
# The longest recording the studio decodes to listen to (an hour of 16 kHz audio is 230 MB of samples).
LISTEN_AUDIO_MAX_S = 60 * 60

# -- prompts and text: the request models refuse longer ones, naming the field and the limit ----------------
# vLLM-Omni states no cap on an image or video prompt; what reaches the model is cut by its text encoder at
# `max_sequence_length` = 512 tokens (FLUX.2 and Wan's T5), about 2,000 characters of English. 4,000
# characters lose nothing a model would read, and a 60 MB prompt is refused before any work is done.
PROMPT_MAX_CHARS = 4_000  # `prompt` and `negative_prompt` of image generations, image edits and videos
# REST speech `input`: what one `input.text` message may carry on vLLM-Omni's WebSocket (128 KiB); longer
# text goes over the WebSocket in several messages (services/speech/text.py).
SPEECH_INPUT_MAX_CHARS = 128 * 1024


def check_length(name: str, value: str | None, limit: int = PROMPT_MAX_CHARS) -> None:
    """InvalidInput naming `name` and the limit when `value` is longer than `limit` characters."""
    if isinstance(value, str) and len(value) > limit:
        raise InvalidInput(f"{name} is {len(value):,} characters long; at most {limit:,} are accepted — shorten it")


# -- the offline engine's request bodies (vLLM-Omni sets none): refused from Content-Length, or as they stream
# in, before anything is parsed
ENGINE_JSON_BODY_BYTES = 8 * 1024 * 1024  # a JSON body: a REST speech request with a 30 s ref_audio fits
ENGINE_FORM_BODY_BYTES = 72 * 1024 * 1024  # a multipart body: 4 edit references of ENGINE_FILE_PART_BYTES + fields
JSON_MAX_DEPTH = 32  # nesting of arrays/objects in one JSON message; no wire message goes deeper than 3

# -- images (POST /v1/images/generations) ---------------------------------------------------------------
IMAGE_SIZE = Range(64, 2048)  # width and height, pixels
IMAGE_STEPS = Range(1, 200)
IMAGE_GUIDANCE = Range(0.0, 20.0)
IMAGE_N = Range(1, 10)  # images per request
IMAGE_EDIT_REFERENCES = Range(1, 4)  # reference images of POST /v1/images/edits

# -- videos (POST /v1/videos/sync, Wan2.1-VACE) ----------------------------------------------------------
VIDEO_SIZE = Range(64, 1280)  # width and height the studio asks for: Wan2.1-VACE's range up to 720p
# What a server's form accepts (vLLM-Omni states no bound; the offline engine keeps one); Wan rounds down to
# multiples of 16, so anything below 16 has no frame at all.
VIDEO_FORM_SIZE = Range(16, 2048)
VIDEO_FRAMES = Range(1, 257)  # Wan rounds to 4k+1
VIDEO_FPS = Range(1, 60)
VIDEO_STEPS = Range(1, 200)
VIDEO_GUIDANCE = Range(0.0, 20.0)

SEED = Range(0, 2**32 - 1)  # image and video seeds

# -- sound (POST /v1/audio/generate, Stable Audio Open 1.0) ------------------------------------------------
SOUND_SAMPLE_RATE = 44_100  # Hz: the model's VAE rate; every answer is this rate, stereo
SOUND_CHANNELS = 2
# The model always renders one window of 1024 latents x 2048 samples (its DiT's sample_size x the Oobleck VAE's
# hop) and cuts the clip out of it: 2,097,152 frames, 47.55 s ("up to 47 s" on the model card). A longer clip is
# refused by vLLM-Omni's pipeline ("Requested audio length (…s) exceeds maximum (…s)").
SOUND_WINDOW_FRAMES = 1024 * 2048
# audio_length in seconds. The low end is exclusive: vLLM-Omni's request model says gt=0 (a clip has length).
SOUND_SECONDS = Range(0.0, SOUND_WINDOW_FRAMES / SOUND_SAMPLE_RATE)
SOUND_STEPS = Range(1, 1000)  # num_inference_steps: vLLM-Omni's bounds (the pipeline's default is 50)
SOUND_GUIDANCE = Range(0.0, 1000.0)  # guidance_scale: vLLM-Omni's bounds (default 7.0; at most 1 turns CFG off)
SOUND_SEED = Range(-(2**63), 2**63 - 1)  # vLLM-Omni takes any 64-bit seed here (torch's manual_seed)

# -- uploads and references ------------------------------------------------------------------------------
MAX_UPLOAD_BYTES = 25 * 1024 * 1024  # an image file larger than this is refused before decoding
MAX_PIXELS = 40_000_000  # ~8K x 5K; more is refused from the header alone (decompression bombs)
# vLLM-Omni (Starlette's form parser) caps each multipart part at 1 MiB; stay clearly under it.
REFERENCE_PART_LIMIT = 1_000_000
ENGINE_FILE_PART_BYTES = 16 * 1024 * 1024  # the offline engine's bound on a file part (vLLM-Omni sets none)

# -- files the user names (services/files.py reads them: regular files only, at most this many bytes) -------
PROMPTS_FILE_MAX_BYTES = 4 * 1024 * 1024  # an evaluation's prompts_file: a thousand prompts at the cap fit
SPEC_FILE_MAX_BYTES = 1024 * 1024  # an evaluation SPEC.toml, a load-test --spec JSON
RATINGS_FILE_MAX_BYTES = 16 * 1024 * 1024  # a filled ratings CSV to import
STATE_FILE_MAX_BYTES = 16 * 1024 * 1024  # an infra deployment state file (a few KB in practice)
# A reference recording (voices add --audio, --ref-audio): at most 30 s, which even as 96 kHz 32-bit stereo
# WAV is 23 MB; anything larger cannot be a usable reference.
REFERENCE_AUDIO_FILE_MAX_BYTES = 32 * 1024 * 1024

# -- SageMaker ---------------------------------------------------------------------------------------------
ASYNC_INLINE_LIMIT = 128_000  # bytes: larger async request payloads must go through S3
ASYNC_INVOCATION_TIMEOUT_S = 3600  # SageMaker async allows up to an hour
REALTIME_PAYLOAD_MAX_BYTES = 6 * 1024 * 1024  # InvokeEndpoint body; larger fails with a 413 ModelError
