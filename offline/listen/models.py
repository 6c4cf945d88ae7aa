"""What the engine's recognizer answers to, and how it says what it is."""

from __future__ import annotations

from protocol.listen import DEFAULT_LISTEN_MODEL, is_english, model_not_found_text

# The engine stands in for the listen endpoint's model; its answers are labelled as the preview they are (in
# /v1/models and the X-Offline-Preview header: plain ASCII).
LISTEN_MODELS = (DEFAULT_LISTEN_MODEL,)
PREVIEW_NOTE = (
    "Offline preview: pocketsphinx (CMU US English model) with Silero VAD, not Voxtral. English only. Measured on "
    "this engine's own clean synthetic speech (12 sentences, 114 words): WER 9.6 %, RTF 0.11 on 2 CPU cores; "
    "real recordings fare worse (see docs/listen.md)."
)


def listen_model_error(model: str | None) -> str | None:
    """vLLM's words for a model the server does not serve (no model, or an empty one, means the served one)."""
    if model and model not in LISTEN_MODELS:
        return model_not_found_text(model)
    return None


def language_error(language: str | None) -> str | None:
    """Why the recognizer cannot take `language` (it knows English only), or None."""
    if is_english(language):
        return None
    return (f"Unsupported language: {language!r}. The offline engine's recognizer (pocketsphinx) understands "
            "English only: send language 'en' or none")
