"""Video generation as jobs that survive restarts.

- request.py     VideoRequest (published defaults, checks) and the multipart body every transport sends
- client.py      VideoClient (prepare, submit, wait, result), the MP4 check, poll intervals
- jobs.py        VideoJobs: worker threads, each job kept in the history, resumed after a restart
- transports.py  the four-method interface; vLLM-Omni's /v1/videos/sync; a mock
- sagemaker.py   invoke_endpoint_async with S3 (or inline) bodies and polled output/failure objects
"""

from services.videos.client import (
    JOB_TIMEOUT_S,
    Mp4Info,
    VideoClient,
    VideoResult,
    check_mp4,
    omni_client,
    poll_intervals,
)
from services.videos.jobs import REFERENCE_FILE, VIDEO_FILE, VideoJobs, job_request
from services.videos.request import (
    DEFAULT_FPS,
    DEFAULT_FRAMES,
    DEFAULT_GUIDANCE,
    DEFAULT_HEIGHT,
    DEFAULT_STEPS,
    DEFAULT_WIDTH,
    SMOKE_TEST_STEPS,
    MultipartBody,
    VideoRequest,
    encode_request,
)
from services.videos.transports import (
    JobHandle,
    JobState,
    MockVideoTransport,
    OmniVideoTransport,
    VideoPayload,
    VideoTransport,
)

__all__ = [
    "JOB_TIMEOUT_S", "DEFAULT_FPS", "DEFAULT_FRAMES", "DEFAULT_GUIDANCE", "DEFAULT_HEIGHT", "DEFAULT_STEPS", "DEFAULT_WIDTH",
    "JobHandle", "JobState", "MockVideoTransport", "Mp4Info", "MultipartBody", "OmniVideoTransport",
    "REFERENCE_FILE", "SMOKE_TEST_STEPS", "VIDEO_FILE", "VideoClient", "VideoJobs", "VideoPayload",
    "VideoRequest", "VideoResult", "VideoTransport", "check_mp4", "encode_request", "job_request",
    "omni_client", "poll_intervals",
]
