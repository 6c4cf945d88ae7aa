"""A speech session's `session.config`, built and checked before anything is sent (`speech_config`), and any
caller's config made one for streamed PCM (`streaming_config`).
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from protocol.errors import InvalidInput
from protocol.limits import FIRST_CHUNK_FRAMES, INSTRUCTIONS_MAX_CHARS
from protocol.speech import SessionConfig, SplitGranularity, TaskType
from services.speech.reference import ReferenceAudio


def speech_config(
    voice: str | None = None,
    language: str | None = None,
    *,
    split_granularity: SplitGranularity = "clause",
    task_type: TaskType | None = None,
    instructions: str | None = None,
    ref_audio: ReferenceAudio | str | None = None,
    ref_text: str | None = None,
    initial_codec_chunk_frames: int | None = None,
    **extra: Any,
) -> SessionConfig:
    """A `session.config` for streamed PCM: response_format pcm, stream_audio true, clause splitting.

    What the voice does (docs/protocols.md, "Speech stream"; the model decides which task types exist):
    - CustomVoice (the default): a preset `voice`; `instructions` set its style ("slow and warm").
    - VoiceDesign: a voice made from `instructions`, the description ("a calm, low female voice"); required.
    - Base (cloning): `ref_audio` — a ReferenceAudio (services.speech.load_reference) or its data: URL — with
      `ref_text`, its transcript (without one only the timbre is taken: x_vector_only_mode); or `voice`, the
      name of a saved voice (services.speech.voices). A reference without a task type means Base.
    `initial_codec_chunk_frames` trades first audio for smoothness: smaller is earlier, larger is smoother.
    Every rule is checked here, before anything is sent: InvalidInput naming what to fix.
    """
    instructions = (instructions or "").strip() or None
    ref_text = (ref_text or "").strip() or None
    voice = (voice or "").strip() or None
    if isinstance(ref_audio, ReferenceAudio):
        ref_audio = ref_audio.data_url()
    elif ref_audio is not None and not (isinstance(ref_audio, str) and ref_audio.startswith("data:audio/")):
        raise InvalidInput("the reference must be a recording (services.speech.load_reference) or its "
                           "data:audio/wav;base64,… URL")
    if task_type is None and (ref_audio or ref_text):
        task_type = "Base"
    if instructions is not None and len(instructions) > INSTRUCTIONS_MAX_CHARS:
        what = "voice description is" if task_type == "VoiceDesign" else "instructions are"
        raise InvalidInput(f"the {what} {len(instructions)} characters; the limit is {INSTRUCTIONS_MAX_CHARS}: "
                           "shorten them")
    if task_type == "VoiceDesign":
        if instructions is None:
            raise InvalidInput("VoiceDesign makes a voice from a description: describe the voice in the instructions, "
                               "e.g. \"a calm, low female voice with a slight British accent\"")
        voice = None  # the description is the voice
    if task_type == "Base":
        if voice == "default":
            voice = None
        if ref_audio is None and voice is None:
            raise InvalidInput("cloning (Base) needs a reference: a recording of 3–30 s of the speaker (with its "
                               "transcript for the best clone), or the name of a saved voice")
        if ref_audio is not None and ref_text is None:
            extra.setdefault("x_vector_only_mode", True)  # no transcript: the speaker's timbre only
    elif ref_audio is not None or ref_text is not None:
        raise InvalidInput(f"a reference recording and its transcript are for cloning (Base), not {task_type}: "
                           "choose Base, or leave the reference out")
    if initial_codec_chunk_frames is not None:
        FIRST_CHUNK_FRAMES.check("first-chunk frames", initial_codec_chunk_frames,
                                 hint="smaller gives earlier first audio, larger smoother audio")
    try:
        return SessionConfig(
            voice=voice,
            language=language or None,
            response_format="pcm",
            stream_audio=True,
            split_granularity=split_granularity,
            task_type=task_type,
            instructions=instructions,
            ref_audio=ref_audio,
            ref_text=ref_text,
            initial_codec_chunk_frames=initial_codec_chunk_frames,
            **extra,
        )
    except ValidationError as exc:
        raise InvalidInput("; ".join(f"{'.'.join(map(str, e['loc'])) or 'config'}: {e['msg']}"
                                     for e in exc.errors(include_url=False))) from None


def streaming_config(config: SessionConfig | None) -> SessionConfig:
    """The session needs streamed PCM; any other audio settings of the caller are kept."""
    if config is None:
        return speech_config()
    if config.stream_audio and config.response_format == "pcm":
        return config
    if config.speed != 1.0:
        raise InvalidInput(f"speed must be 1.0 for streamed speech (got {config.speed}); leave speed unset")
    return config.model_copy(update={"response_format": "pcm", "stream_audio": True})
