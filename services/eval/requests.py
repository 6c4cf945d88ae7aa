"""What a variant's settings make: the request each item sends, checked (shared by the SPEC check and the runner)."""

from __future__ import annotations

from typing import Any


def build_request(modality: str, prompt: str, settings: dict[str, Any]) -> Any:
    """The request (voice: the session config) a variant's settings make, checked: InvalidInput names the
    setting to fix. The SPEC check calls it with a sample prompt ("check"), so bad values fail before any run."""
    if modality == "voice":
        from services.speech import speech_config
        return speech_config(voice=settings.get("voice"), language=settings.get("language"),
                             split_granularity=settings.get("split", "clause"), task_type=settings.get("task_type"),
                             instructions=settings.get("instructions"),
                             initial_codec_chunk_frames=settings.get("first_chunk_frames"))
    if modality == "listen":
        from protocol.errors import InvalidInput
        from protocol.listen import is_english
        if not is_english(settings.get("language")):
            raise InvalidInput(f"language {settings.get('language')!r}: word error rates are measured on English "
                               "only; leave language out or give en")
        return {k: settings.get(k) for k in ("model", "language", "route")}
    if modality == "image":
        from services.images import DEFAULT_SIZE, DEFAULT_STEPS, ImageRequest
        return ImageRequest(prompt=prompt, size=settings.get("size") or DEFAULT_SIZE,
                            steps=settings.get("steps") or DEFAULT_STEPS, guidance=settings.get("guidance"),
                            seed=settings.get("seed"), negative_prompt=settings.get("negative_prompt")).validated()
    from services.videos import VideoRequest
    fields = {k: settings[k] for k in ("width", "height", "frames", "fps", "steps", "guidance", "seed",
                                       "negative_prompt") if settings.get(k) is not None}
    return VideoRequest(prompt=prompt, **fields).validated()
