"""What every vLLM-Omni route shares: JSON framing, REST error bodies, health, the model list, headers.

Field names and texts follow vLLM-Omni 0.30 (docs/protocols.md, "Common")."""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict

# Response headers of the media routes (docs/protocols.md, "Images" and "Videos").
HEADER_REQUEST_ID = "X-Request-Id"
HEADER_INFERENCE_TIME = "X-Inference-Time-S"  # model time in seconds; else a numeric `inference_time_s` in the body
HEADER_STAGE_DURATIONS = "X-Stage-Durations"


def dumps(message: BaseModel) -> str:
    """Serialise a wire model as one compact JSON text frame."""
    wire = getattr(message, "wire", None)
    data = wire() if callable(wire) else message.model_dump()
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


def error_text(body: str) -> str:
    """The server's own words from a vLLM-Omni/OpenAI/FastAPI error body (or the start of the body)."""
    try:
        data = json.loads(body)
    except ValueError:
        return body.strip()[:500]
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
        detail = data.get("detail")
        if isinstance(detail, str):
            return detail
        if isinstance(detail, list):  # FastAPI validation errors
            return "; ".join(
                f"{'.'.join(str(p) for p in d.get('loc', [])[1:]) or 'body'}: {d.get('msg')}"
                for d in detail if isinstance(d, dict)
            ) or str(detail)
        if data.get("message"):
            return str(data["message"])
    return str(data)[:500]


class ErrorInfo(BaseModel):
    """The `error` object of a REST error body (OpenAI / vLLM shape)."""

    model_config = ConfigDict(extra="allow")  # generation failures add partial_audio / action

    message: str
    type: str = "BadRequestError"
    param: str | None = None
    code: int = 400


class ErrorResponse(BaseModel):
    """`{"error": {...}}`: what vLLM-Omni's REST routes return with a 4xx/5xx status."""

    error: ErrorInfo


# REST: health and models
class HealthResponse(BaseModel):
    status: str = "healthy"


class ModelCard(BaseModel):
    id: str
    object: str = "model"
    owned_by: str = "vllm-omni"


class ModelList(BaseModel):
    object: str = "list"
    data: list[ModelCard]
