"""Voice (Qwen3-TTS): text in, speech out while it is generated — its clients on each target.

A server: the WebSocket `/v1/audio/speech/stream` and the voice library over `/v1/audio/voices`. SageMaker: the
HTTP/2 bidirectional stream to the voice endpoint, voices uploaded through `invoke_endpoint` and listed from the
studio's own records.
"""

from __future__ import annotations

from typing import Any

from services.eval.voice import EVALUATION
from services.families.parts import Build, FamilyCode, SageMakerParts, ServerParts


def _server(p: ServerParts) -> Any:
    from services.speech.client import omni_client

    return omni_client(p.url, p.settings)


def _sagemaker(p: SageMakerParts) -> Any:
    from services.aws import missing_endpoint
    from services.speech import SpeechClient
    from services.speech.sagemaker_catalog import SageMakerCatalog
    from services.speech.sagemaker_http2 import SPEECH_INVOCATION_PATH

    voice = p.endpoint("voice")

    def transport() -> Any:
        if voice is None:
            raise missing_endpoint("voice")
        return p.stream(voice, SPEECH_INVOCATION_PATH)

    region = p.targets.region
    return SpeechClient(transport, SageMakerCatalog(p.aws, voice, p.targets.voice_model),
                        target=f"SageMaker endpoint {voice} ({region})" if voice else "SageMaker (no voice endpoint)")


def _voices_server(p: ServerParts) -> Any:
    from services.speech.voices import OmniVoices

    # the offline engine's port changes with every start: its voices are recorded under one name
    return OmniVoices(p.url, p.history, record_target="offline engine" if p.kind == "offline" else None,
                      timeout=p.settings.request_timeout_s, connect_timeout=p.settings.connect_timeout_s)


def _voices_sagemaker(p: SageMakerParts) -> Any:
    from services.speech.voices import SageMakerVoices

    return SageMakerVoices(p.aws, p.endpoint("voice"), p.history)


def _smoke(backend: Any, ctx: Any) -> Any:
    from services.smoke.voice import smoke_voice

    return smoke_voice(backend, ctx)


def _load() -> Any:
    """Its load part (services/load/voice.py), imported when a sweep first asks."""
    from services.load.voice import VoiceLoad

    return VoiceLoad()


FAMILY = FamilyCode(
    name="voice", home=("services/speech", "offline/speech", "offline/voice"), load=_load, smoke=_smoke,
    clients={"voice": Build(_server, _sagemaker), "voices": Build(_voices_server, _voices_sagemaker)},
    evaluation=EVALUATION,
)
