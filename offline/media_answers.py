"""How the image and video routes answer a request they refuse, in vLLM-Omni's words (offline/media.py,
offline/videos.py).

Error bodies are vLLM's `{"error": {"message", "type", "param", "code"}}` with the status phrase as `type`;
request validation failures are **400** with vLLM's "N validation error(s):" message, located as FastAPI
locates a request body's fields; form fields cap at starlette's 1 MB. A form's checks raise `Refusal` holding
the answer, which the route returns.
"""

from __future__ import annotations

import random
from http import HTTPStatus
from typing import Any

from fastapi.responses import JSONResponse, Response
from pydantic import ValidationError

from protocol.common import ErrorInfo, ErrorResponse

MAX_SEED = 2**32 - 1  # vLLM-Omni draws random seeds in [0, 2³²−1]
MAX_FORM_PART_BYTES = 1024 * 1024  # starlette's per-field cap, which vLLM-Omni keeps (FastAPI Form defaults)
ECHO_MAX_CHARS = 80  # how much of a refused value an error message repeats


def error(message: str, status: int = HTTPStatus.BAD_REQUEST, param: str | None = None) -> JSONResponse:
    """What vLLM's HTTPException handler returns: the status phrase as `type`, the status as `code`."""
    info = ErrorInfo(message=message, type=HTTPStatus(status).phrase, param=param, code=int(status))
    return JSONResponse(ErrorResponse(error=info).model_dump(), status_code=int(status))


def model_mismatch(asked: str, serving: str) -> JSONResponse:
    return error(f"Model mismatch: request specifies '{asked}' but server is running '{serving}'.")


def validation_error(errors: list[Any]) -> JSONResponse:
    """What vLLM's RequestValidationError handler returns: 400, "N validation error(s):" then each error."""
    label = "error" if len(errors) == 1 else "errors"
    message = (f"{len(errors)} validation {label}:\n" + "".join(f"  {e}\n" for e in errors)).rstrip()
    first = errors[0] if errors else None
    param = ".".join(str(p) for p in first["loc"]) if isinstance(first, dict) and first.get("loc") else None
    return error(message, HTTPStatus.BAD_REQUEST, param)


def body_errors(exc: ValidationError) -> list[dict[str, Any]]:
    """Pydantic errors located the way FastAPI reports request bodies: ("body", field, ...)."""
    errors = [{**e, "loc": ("body", *e["loc"])} for e in exc.errors(include_url=False)]
    for e in errors:
        if e["type"] == "missing":
            e["input"] = None  # FastAPI validates each field on its own: a missing one has no input
        elif isinstance(e.get("input"), str) and len(e["input"]) > ECHO_MAX_CHARS:
            # an oversized prompt is not echoed back whole: its start says which one it was
            e["input"] = e["input"][:ECHO_MAX_CHARS] + f"… ({len(e['input']):,} characters)"
    return errors


def value_error(field: str, message: str, value: Any) -> dict[str, Any]:
    """A field-validator failure, as pydantic (and so vLLM) reports it."""
    return {"type": "value_error", "loc": ("body", field), "msg": f"Value error, {message}", "input": value,
            "ctx": {"error": ValueError(message)}}


def random_seed(seed: int | None) -> int:
    return seed if seed is not None else random.randint(0, MAX_SEED)


class Refusal(Exception):
    """A request refused with vLLM-Omni's answer (`response`), raised by a form's checks and returned by its route."""

    def __init__(self, response: Response) -> None:
        super().__init__(response.status_code)
        self.response = response


def form_fields(form: Any, skip: tuple[str, ...] = ()) -> dict[str, str]:
    """The form's text fields; FastAPI treats an empty form field as absent."""
    return {key: value for key, value in form.multi_items()
            if isinstance(value, str) and value != "" and key not in skip}

