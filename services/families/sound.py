"""Sound (Stable Audio Open 1.0): a prompt in, a 44.1 kHz stereo clip out, through vLLM-Omni's
`POST /v1/audio/generate` — its clients on each target, its smoke check, its part in evaluations (services/eval/sound.py) and in load sweeps
(services/load/sound.py).

A server: JSON to the route, the audio file back. SageMaker: the same body through `invoke_endpoint` with
`route=/v1/audio/generate` in CustomAttributes on the realtime sound endpoint (`infra deploy --with sound`).
"""

from __future__ import annotations

from typing import Any

from services.eval.sound import EVALUATION
from services.families.parts import Build, FamilyCode, SageMakerParts, ServerParts


def _server(p: ServerParts) -> Any:
    from services.sound import SoundClient
    from services.sound.transports import OmniSoundTransport

    return SoundClient(OmniSoundTransport(p.url, timeout=max(p.settings.request_timeout_s, 300.0),
                                          connect_timeout=p.settings.connect_timeout_s))


def _sagemaker(p: SageMakerParts) -> Any:
    from services.sound import SoundClient
    from services.sound.transports import SageMakerSoundTransport

    return SoundClient(SageMakerSoundTransport(p.aws, p.endpoint("sound")))


def _smoke(backend: Any, ctx: Any) -> Any:
    from services.smoke.sound import smoke_sound

    return smoke_sound(backend, ctx)


def _load() -> Any:
    """Its load part (services/load/sound.py), imported when a sweep first asks."""
    from services.load.sound import SoundLoad

    return SoundLoad()


FAMILY = FamilyCode(name="sound", load=_load, smoke=_smoke, clients={"sound": Build(_server, _sagemaker)},
                    evaluation=EVALUATION)
