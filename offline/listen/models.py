"""What the engine's recognizer answers to, and how it says what it is."""

from __future__ import annotations

from protocol.listen import DEFAULT_LISTEN_MODEL, is_english, model_not_found_text

# The engine stands in for the listen endpoint's model; its answers are labelled as the preview they are (in
# /v1/models and the X-Offline-Preview header: plain ASCII).
LISTEN_MODELS = (DEFAULT_LISTEN_MODEL,)
PREVIEW_NOTES = {  # by the engine's recognizer (offline.listen.engine: OMNI_ENGINE_RECOGNIZER)
    "whisper": (
        "Offline preview: Whisper tiny.en (CTranslate2 int8) with Silero VAD, not Voxtral. English only. Measured "
        "on 2 CPU cores (bench/listen_accuracy.py): WER 0.9 % on this engine's own voice (12 sentences, 114 words), "
        "4.2 % on read human speech (5 LibriVox lines, 71 words), RTF 0.02-0.04; spontaneous speech is not "
        "measured (see docs/listen.md)."
    ),
    "pocketsphinx": (
        "Offline preview: pocketsphinx (CMU US English model) with Silero VAD, not Voxtral. English only. Measured on "
        "this engine's own clean synthetic speech (12 sentences, 114 words): WER 9.7 %, RTF 0.13 on 2 CPU cores; "
        "32-34 % on read human speech (5 LibriVox lines, 71 words; see docs/listen.md)."
    ),
}
PREVIEW_NOTE = PREVIEW_NOTES["whisper"]  # the default recognizer's
SERVED_BY = {"whisper": "Whisper tiny.en (CTranslate2 int8)", "pocketsphinx": "pocketsphinx 5 (CMU US English)"}


def listen_model_error(model: str | None) -> str | None:
    """vLLM's words for a model the server does not serve (no model, or an empty one, means the served one)."""
    if model and model not in LISTEN_MODELS:
        return model_not_found_text(model)
    return None


def language_error(language: str | None) -> str | None:
    """Why the recognizer cannot take `language` (it knows English only), or None."""
    if is_english(language):
        return None
    return (f"Unsupported language: {language!r}. The offline engine's recognizer (Whisper tiny.en, or pocketsphinx) "
            "understands English only: send language 'en' or none")
