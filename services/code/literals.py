"""How generated code writes values: Python literals (strings in double quotes, as a person would type them) and
the constant a reference file is named by (`reference-1.png` → REFERENCE_1). Shared by every generator."""

from __future__ import annotations

import json
from typing import Any


def py_value(value: Any) -> str:
    """A Python literal of `value`, strings in double quotes."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{py_value(k)}: {py_value(v)}" for k, v in value.items()) + "}"
    return repr(value)


def py_dict(body: dict[str, Any]) -> str:
    """A dict literal, one key per line."""
    return "{\n" + "".join(f"    {py_value(k)}: {py_value(v)},\n" for k, v in body.items()) + "}"


def kwargs(body: dict[str, Any], indent: str = "    ") -> str:
    """Keyword arguments, one per line."""
    return "".join(f"{indent}{k}={py_value(v)},\n" for k, v in body.items())


def const(name: str) -> str:
    """The constant (and environment variable) a file beside the script is named by."""
    stem = name.rsplit(".", 1)[0]
    word = "".join(c if c.isascii() and c.isalnum() else "_" for c in stem).upper() or "REFERENCE"
    return word if word[0].isalpha() else f"FILE_{word}"  # "0000.wav" → FILE_0000: a name Python and sh accept
