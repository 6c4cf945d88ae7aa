"""Request checks the WebSocket and REST speech paths share, in vLLM-Omni's Qwen3-TTS wording and order, and
the style each request is previewed with on the Piper voice (offline.styles)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from offline import voice_sources, voices
from offline.splitter import strip_blank
from offline.styles import (
    Style,
    combined,
    style_for_embedding,
    style_for_instructions,
    style_for_pitch,
    style_for_speaker,
)
from offline.voice import DEFAULT_VOICE, LANGUAGES, VOICE_NAMES, VoiceEngine
from protocol.limits import INSTRUCTIONS_MAX_CHARS, Range
from protocol.speech import VOICE_MODELS, SessionConfig, SpeechRequest

MAX_NEW_TOKENS = Range(1, 4096)  # vLLM-Omni's bounds on max_new_tokens


def check_model(model: str | None) -> str | None:
    """The engine answers to every model of the catalog's voice family (protocol.speech.VOICE_MODELS); naming one
    makes it that checkpoint (its task type)."""
    if model is not None and model not in VOICE_MODELS:
        return f"The model `{model}` does not exist."
    return None


def resolve_voice(name: str | None) -> str | None:
    """The lower-cased voice to speak with; None for the model's default speaker."""
    if name is None or name.lower() == DEFAULT_VOICE:
        return None
    return name.lower()


@dataclass(frozen=True)
class SpeechAsk:
    """What a request asks of the voice besides its text: the fields SessionConfig and SpeechRequest share."""

    voice: str | None = None
    language: str | None = None
    task_type: str | None = None
    instructions: str | None = None
    ref_audio: str | None = None
    ref_text: str | None = None
    x_vector_only_mode: bool | None = None
    speaker_embedding: list[float] | None = None
    max_new_tokens: int | None = None
    model: str | None = None
    seed: int | None = None

    @classmethod
    def of(cls, request: SessionConfig | SpeechRequest) -> SpeechAsk:
        return cls(**{f: getattr(request, f) for f in cls.__dataclass_fields__})

    def task(self, store: voices.VoiceStore) -> str:
        """The task vLLM-Omni runs: a reference implies Base, and so does an uploaded voice's name."""
        task_type = self.task_type
        if task_type is None and (self.ref_audio is not None or self.ref_text is not None):
            task_type = "Base"
        if store.get(self.voice) is not None:
            task_type = "Base"
        return task_type or "CustomVoice"


def _model_variant(model: str | None) -> str | None:
    types = VOICE_MODELS.get(model or "")
    return types[0] if types and len(types) == 1 else None


def _needs_ref_text(ask: SpeechAsk, x_vector_only: bool) -> str | None:
    if not x_vector_only and not (ask.ref_text and ask.ref_text.strip()):
        return (
            "Base task requires non-empty 'ref_text' (transcript of the reference audio) unless "
            "'x_vector_only_mode' is enabled"
        )
    return None


def check_speech(ask: SpeechAsk, text: str, store: voices.VoiceStore) -> str | None:
    """Why this request cannot be spoken (None when it can), in vLLM-Omni's words and order.

    The offline engine serves all three task types; a request that names a model is held to that model's one.
    """
    task = ask.task(store)
    variant = _model_variant(ask.model)
    if variant is not None and task != variant:
        return (
            f"Qwen3-TTS {variant} checkpoint does not support task_type='{task}'. "
            f"Use task_type='{variant}' or load the matching {task} checkpoint."
        )
    if not text or not strip_blank(text):  # vLLM-Omni strips whitespace; zero-width characters are as empty
        return "Input text cannot be empty"
    if (nul := text.find("\x00")) >= 0:  # the voice (espeak) reads C strings: it would stop or fail there
        return f"Input text contains a NUL character (U+0000) at index {nul}; remove it"
    if ask.language is not None and ask.language.title() not in LANGUAGES:
        return f"Invalid language '{ask.language.title()}'. Supported: {', '.join(sorted(LANGUAGES))}"
    chosen = resolve_voice(ask.voice)
    if task == "CustomVoice" and chosen is not None and chosen not in VOICE_NAMES:
        supported = sorted({*VOICE_NAMES, DEFAULT_VOICE, *store.names()})
        return f"Invalid voice '{chosen}'. Supported: {', '.join(supported)}"
    x_vector_only = bool(ask.x_vector_only_mode)
    if ask.speaker_embedding is not None:
        if task != "Base":
            return "'speaker_embedding' is only valid for Base task"
        if not ask.speaker_embedding:
            return "'speaker_embedding' must be a non-empty list of floats"
        x_vector_only = True  # an embedding implies x-vector-only cloning
        if (error := voice_sources.embedding_dim_error(len(ask.speaker_embedding), ask.model)) is not None:
            return error
    if task == "Base":
        if ask.voice is None:
            if ask.ref_audio is None and ask.speaker_embedding is None:
                return "Base task requires 'ref_audio' or 'speaker_embedding' for voice cloning"
            if ask.ref_audio is not None and (error := voice_sources.ref_audio_format_error(ask.ref_audio)):
                return error
            if (error := _needs_ref_text(ask, x_vector_only)) is not None:
                return error
        elif store.get(ask.voice) is None:  # a built-in speaker: the reference must come with the request
            if ask.ref_audio is None:
                return f"Base task with built-in speaker '{ask.voice.lower()}' requires 'ref_audio' for voice cloning"
            if (error := voice_sources.ref_audio_format_error(ask.ref_audio)) is not None:
                return error
            if (error := _needs_ref_text(ask, x_vector_only)) is not None:
                return error
    else:
        if ask.ref_text is not None:
            return "'ref_text' is only valid for Base task"
        if ask.x_vector_only_mode is not None:
            return "'x_vector_only_mode' is only valid for Base task"
    if task == "VoiceDesign" and not ask.instructions:
        return "VoiceDesign task requires 'instructions' to describe the voice"
    if ask.instructions and len(ask.instructions) > INSTRUCTIONS_MAX_CHARS:
        return f"Instructions too long (max {INSTRUCTIONS_MAX_CHARS} characters)"
    if ask.max_new_tokens is not None:
        if ask.max_new_tokens < MAX_NEW_TOKENS.lo:
            return f"max_new_tokens must be at least {MAX_NEW_TOKENS.lo}"
        if ask.max_new_tokens > MAX_NEW_TOKENS.hi:
            return f"max_new_tokens cannot exceed {MAX_NEW_TOKENS.hi}"
    return None


async def resolve_style(ask: SpeechAsk, store: voices.VoiceStore, engine: VoiceEngine) -> Style | None:
    """How the Piper voice previews this (checked) request; None: the plain voice. SpeechInputError if it cannot.

    CustomVoice: the preset speaker's rendering (offline.styles.SPEAKERS) with the style `instructions` on top.
    VoiceDesign: the description's words. Base: the reference's median pitch — `ref_audio` when given, else the
    uploaded voice — or an embedding's fixed pitch. A `seed` makes the plain voice or a preset speaker
    deterministic (the engine has no randomness to seed: any seed, same audio).
    """
    style = await _style(ask, store, engine)
    if ask.seed is not None:
        return Style(deterministic=True) if style is None else replace(style, deterministic=True)
    return style


async def _style(ask: SpeechAsk, store: voices.VoiceStore, engine: VoiceEngine) -> Style | None:
    task = ask.task(store)
    if task in ("CustomVoice", "VoiceDesign"):
        speaker = style_for_speaker(resolve_voice(ask.voice) or "") if task == "CustomVoice" else None
        if not ask.instructions:
            return speaker
        source = "the voice description" if task == "VoiceDesign" else "the style instructions"
        style = style_for_instructions(ask.instructions, source=source)
        return style if speaker is None else combined(speaker, style)
    if ask.ref_audio is not None:
        try:
            reference = await voice_sources.reference_from_data_url(ask.ref_audio)
        except voice_sources.VoiceError as exc:
            raise SpeechInputError(str(exc)) from None
        if reference.median_f0 is None:
            raise SpeechInputError(voice_sources.no_pitch_message("ref_audio"))
        return style_for_pitch(reference.median_f0, await engine.median_f0(), source="the ref_audio recording")
    stored = store.get(ask.voice)
    if stored is not None:
        if stored.embedding_style is not None:
            return replace(stored.embedding_style, source=f"uploaded voice '{stored.info.name}' (embedding)")
        if stored.median_f0 is None:
            what = f"The recording of uploaded voice '{stored.info.name}'"
            raise SpeechInputError(voice_sources.no_pitch_message(what))
        return style_for_pitch(stored.median_f0, await engine.median_f0(),
                               source=f"uploaded voice '{stored.info.name}'")
    if ask.speaker_embedding:
        return style_for_embedding(ask.speaker_embedding)
    return None



class SpeechInputError(ValueError):
    """A request the voice cannot speak; the message says what to change."""
