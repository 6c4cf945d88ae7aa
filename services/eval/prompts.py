"""A SPEC's text prompts: `prompts` (a list, or the lines of one text) or `prompts_file` (.txt one per line, .csv
its first column) — what every family that takes text prompts reads (services/eval/family.py)."""

from __future__ import annotations

import csv
import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

from protocol.errors import InvalidInput
from protocol.limits import PROMPTS_FILE_MAX_BYTES
from services.files import read_user_file

ITEM_KEYS = ("items", "items_file")  # a SPEC's recordings, for a family that takes audio (services/eval/listen.py)


def read_prompts_file(path: Path) -> list[str]:
    """One prompt per line (.txt), or the first column of each row (.csv; a header row `prompt` is skipped)."""
    data = read_user_file(path, what="prompts_file", limit=PROMPTS_FILE_MAX_BYTES,
                          hint="; give a UTF-8 .txt or .csv file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"cannot read prompts_file {path} ({exc}); give a UTF-8 .txt or .csv file") from None
    if path.suffix.lower() == ".csv":
        rows = [r[0] for r in csv.reader(io.StringIO(text)) if r]
        if rows and rows[0].strip().lower() == "prompt":
            rows = rows[1:]
        return [r.strip() for r in rows if r.strip()]
    return [line.strip() for line in text.splitlines() if line.strip()]


def resolve(value: Any, base_dir: Path | None) -> Path:
    """A path named in a SPEC, relative to the SPEC's folder."""
    path = Path(str(value))
    return base_dir / path if base_dir is not None and not path.is_absolute() else path


def text_prompts(data: dict[str, Any], base_dir: Path | None, *, check: Callable[[str, str], None],
                 modality: str, required: bool = True) -> list[str]:
    """The SPEC's prompt set, each prompt passed to `check(what, prompt)`; never empty when `required` (a SPEC
    with a variant of results from the history takes their prompts too)."""
    for key in ITEM_KEYS:
        if key in data:
            raise InvalidInput(f"{key} names a listen evaluation's recordings; a {modality} evaluation has prompts")
    if "prompts" in data and "prompts_file" in data:
        raise InvalidInput("give prompts or prompts_file, not both")
    if "prompts_file" in data:
        prompts = read_prompts_file(resolve(data.pop("prompts_file"), base_dir))
    else:
        prompts = data.get("prompts", [])
        if isinstance(prompts, str):
            prompts = [p for p in prompts.splitlines()]
        if not isinstance(prompts, list) or not all(isinstance(p, str) for p in prompts):
            raise InvalidInput("prompts must be a list of texts")
        prompts = [p.strip() for p in prompts if p.strip()]
    if not prompts and required:
        raise InvalidInput("the prompt set is empty: give at least one prompt (prompts = [...] or prompts_file)")
    for i, prompt in enumerate(prompts, 1):
        check(f"prompt {i}", prompt)
    return prompts
