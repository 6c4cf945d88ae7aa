"""A short recording of known words, for checks that need speech (the infra smoke test of a listen endpoint):
the offline engine's own voice saying them (`POST /v1/audio/speech`, seeded: the same audio every time)."""

from __future__ import annotations

import httpx

from protocol.errors import BackendUnreachable, ServerError


def spoken_sample(text: str, *, timeout: float = 60.0) -> bytes:
    """`text` spoken by the offline engine's voice, as a WAV file (the engine is started if it is not running)."""
    from offline.launch import shared_engine

    return spoken_sample_at(shared_engine().url, text, timeout=timeout)


def spoken_sample_at(url: str, text: str, *, seed: int = 7, timeout: float = 60.0) -> bytes:
    """`text` spoken by the offline engine's voice at `url` (an engine already running), as a WAV file."""
    try:
        resp = httpx.post(f"{url.rstrip('/')}/v1/audio/speech", json={"input": text, "voice": "joe", "seed": seed},
                          timeout=timeout, trust_env=False)
    except httpx.HTTPError as exc:
        raise BackendUnreachable(f"the offline engine at {url} did not speak the sample ({exc})") from None
    if resp.status_code != 200:
        raise ServerError(f"the offline engine at {url} answered HTTP {resp.status_code} for the sample speech")
    return resp.content
