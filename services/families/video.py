"""Video (Wan2.1-VACE): asynchronous jobs conditioned on images — its clients on each target.

A server: `POST /v1/videos/sync`. SageMaker: `invoke_endpoint_async`, the request inline up to 128 000 bytes or
through S3, the output polled in S3.
"""

from __future__ import annotations

from typing import Any

from services.eval.video import EVALUATION
from services.families.parts import Build, FamilyCode, SageMakerParts, ServerParts


def _server(p: ServerParts) -> Any:
    from services.videos import omni_client

    return omni_client(p.url, p.settings)


def _sagemaker(p: SageMakerParts) -> Any:
    from services.videos import VideoClient
    from services.videos.sagemaker import SageMakerVideoTransport

    t = p.targets
    return VideoClient(SageMakerVideoTransport(p.aws, p.endpoint("video"), bucket=t.bucket, prefix=t.prefix,
                                               kms_key=t.kms_key))


def _smoke(backend: Any, ctx: Any) -> Any:
    from services.smoke.video import smoke_video

    return smoke_video(backend, ctx)


def _load() -> Any:
    """Its load part (services/load/video.py), imported when a sweep first asks."""
    from services.load.video import VideoLoad

    return VideoLoad()


FAMILY = FamilyCode(name="video", home=("services/videos",), load=_load, smoke=_smoke, clients={"video": Build(_server, _sagemaker)},
                    evaluation=EVALUATION)
