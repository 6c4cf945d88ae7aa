"""What every vLLM-Omni route shares: JSON framing, REST error bodies, health, the model list, headers.

Field names and texts follow vLLM-Omni 0.30 (docs/protocols.md, "Common")."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict

from protocol.limits import JSON_MAX_DEPTH

# Response headers of the media routes (docs/protocols.md, "Images" and "Videos").
HEADER_REQUEST_ID = "X-Request-Id"
HEADER_INFERENCE_TIME = "X-Inference-Time-S"  # model time in seconds; else a numeric `inference_time_s` in the body
HEADER_STAGE_DURATIONS = "X-Stage-Durations"


def dumps(message: BaseModel) -> str:
    """Serialise a wire model as one compact JSON text frame."""
    wire = getattr(message, "wire", None)
    data = wire() if callable(wire) else message.model_dump()
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False)


# How much of a target's error text the studio shows (its own words, never its raw body: a target an admin
# registered may still answer with an internal page).
ERROR_EXCERPT_CHARS = 300


def plain_excerpt(text: str, limit: int = ERROR_EXCERPT_CHARS) -> str:
    """`text` on one line, control characters out, at most `limit` characters (an ellipsis says it was cut)."""
    flat = " ".join("".join(c if c.isprintable() else " " for c in str(text)).split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def loads(text: str | bytes, *, max_depth: int = JSON_MAX_DEPTH) -> Any:
    """`json.loads`, refusing arrays/objects nested deeper than `max_depth` as invalid JSON.

    Deep nesting is a json.JSONDecodeError (a ValueError) like any other bad JSON, never a RecursionError: the
    C decoder recurses once per level, so "[[[[…" a hundred thousand deep would otherwise escape as an
    internal error, and anything just under the interpreter's limit would break the code that walks it.
    """
    try:
        value = json.loads(text)
    except RecursionError:
        raise json.JSONDecodeError(f"nesting deeper than {max_depth} levels", _doc(text), 0) from None
    if _deeper_than(value, max_depth):
        raise json.JSONDecodeError(f"nesting deeper than {max_depth} levels", _doc(text), 0)
    return value


def _doc(text: str | bytes) -> str:
    return text if isinstance(text, str) else ""


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether arrays/objects in `value` nest deeper than `limit` (the outermost counts 1); iterative."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def error_text(body: str) -> str:
    """The server's own words from a vLLM-Omni/OpenAI/FastAPI JSON error body — its `error` (or `error.message`),
    `detail` or `message` field — as a bounded plain excerpt; "" when the body is not such JSON (an HTML page,
    a stack trace): the caller then shows the status alone."""
    try:
        data = loads(body)
    except ValueError:
        return ""
    if not isinstance(data, dict):
        return ""
    err = data.get("error")
    if isinstance(err, dict) and isinstance(err.get("message"), str):
        return plain_excerpt(err["message"])
    if isinstance(err, str):
        return plain_excerpt(err)
    detail = data.get("detail")
    if isinstance(detail, str):
        return plain_excerpt(detail)
    if isinstance(detail, list):  # FastAPI validation errors
        return plain_excerpt("; ".join(
            f"{'.'.join(str(p) for p in d.get('loc', [])[1:]) or 'body'}: {d.get('msg')}"
            for d in detail if isinstance(d, dict)))
    if isinstance(data.get("message"), str):
        return plain_excerpt(data["message"])
    return ""


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
