"""Image (FLUX.2-klein): realtime generations and edits — its clients on each target.

A server: `POST /v1/images/generations` and `/v1/images/edits`. SageMaker: `invoke_endpoint` with the route in
CustomAttributes.
"""

from __future__ import annotations

from typing import Any

from services.eval.image import EVALUATION
from services.families.parts import Build, FamilyCode, SageMakerParts, ServerParts


def _server(p: ServerParts) -> Any:
    from services.images import omni_client

    return omni_client(p.url, p.settings)


def _sagemaker(p: SageMakerParts) -> Any:
    from services.images import ImageClient
    from services.images.sagemaker import SageMakerImageTransport

    return ImageClient(SageMakerImageTransport(p.aws, p.endpoint("image")))


def _smoke(backend: Any, ctx: Any) -> Any:
    from services.smoke.image import smoke_image

    return smoke_image(backend, ctx)


def _load() -> Any:
    """Its load part (services/load/image.py), imported when a sweep first asks."""
    from services.load.image import ImageLoad

    return ImageLoad()


FAMILY = FamilyCode(name="image", home=("services/images",), load=_load, smoke=_smoke, clients={"image": Build(_server, _sagemaker)},
                    evaluation=EVALUATION)
