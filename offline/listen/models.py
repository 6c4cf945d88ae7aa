"""What the engine's recognizer answers to, and how it says what it is."""

from __future__ import annotations

from protocol.listen import DEFAULT_LISTEN_MODEL, model_not_found_text

# The engine stands in for the listen endpoint's model; its answers are labelled as the preview they are (in
# /v1/models and the X-Offline-Preview header: plain ASCII).
LISTEN_MODELS = (DEFAULT_LISTEN_MODEL,)
ENGLISH = ("en", "eng", "english", "en-us", "en-gb", "auto")
PREVIEW_NOTE = (
    "Offline preview: pocketsphinx (CMU US English model) with Silero VAD, not Voxtral. English only; measured "
    "on this engine's own synthetic speech: WER 12.8 % (47 words, 10 sentences), RTF 0.09 (see docs/listen.md)."
)


def listen_model_error(model: str | None) -> str | None:
    """vLLM's words for a model the server does not serve (no model, or an empty one, means the served one)."""
    if model and model not in LISTEN_MODELS:
        return model_not_found_text(model)
    return None


def language_error(language: str | None) -> str | None:
    """Why the recognizer cannot take `language` (it knows English only), or None."""
    if language is None or language.strip().lower() in ENGLISH:
        return None
    return (f"Unsupported language: {language!r}. The offline engine's recognizer (pocketsphinx) understands "
            "English only: send language 'en' or none")
