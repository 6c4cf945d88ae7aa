"""Listen (speech recognition): files through `/v1/audio/transcriptions`, streams over `/v1/realtime` — its
clients on each target. On SageMaker: files through `invoke_endpoint`, streams on the backend's shared HTTP/2
clients."""

from __future__ import annotations

from typing import Any

from services.eval.listen import EVALUATION
from services.families.parts import Build, FamilyCode, SageMakerParts, ServerParts


def _server(p: ServerParts) -> Any:
    from services.listen import OmniListen

    return OmniListen(p.url, timeout=p.settings.request_timeout_s, connect_timeout=p.settings.connect_timeout_s)


def _sagemaker(p: SageMakerParts) -> Any:
    from services.aws import endpoint_model
    from services.listen.sagemaker import SageMakerListen

    endpoint = p.endpoint("listen")

    def transport(path: str) -> Any:
        assert endpoint is not None
        return p.stream(endpoint, path)

    return SageMakerListen(p.aws, endpoint, transport=transport,
                           lookup_model=lambda: endpoint_model(p.aws, str(endpoint)),
                           timeout=p.settings.request_timeout_s)


def _smoke(backend: Any, ctx: Any) -> Any:
    from services.smoke.listen import smoke_listen

    return smoke_listen(backend, ctx)


def _load() -> Any:
    """Its load part (services/load/listen.py), imported when a sweep first asks."""
    from services.load.listen import ListenLoad

    return ListenLoad()


FAMILY = FamilyCode(name="listen", load=_load, smoke=_smoke, clients={"listen": Build(_server, _sagemaker)},
                    evaluation=EVALUATION)
