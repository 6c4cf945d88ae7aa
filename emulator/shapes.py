"""Server-side validation of requests against botocore's own service models.

boto3 checks only types and required members before sending; the real service also enforces enums,
lengths, ranges and patterns. This walks the same shapes botocore ships (so the emulator accepts exactly
the instance types, AMI versions and ranges the real API does) and words the failures like AWS:

    1 validation error detected: Value 'ml.x' at 'productionVariants.1.member.instanceType'
    failed to satisfy constraint: Member must satisfy enum value set: [...]
"""

from __future__ import annotations

import functools
import re
from typing import Any

import botocore.session
from botocore.model import OperationModel, ServiceModel, Shape


@functools.cache
def service_model(name: str) -> ServiceModel:
    return botocore.session.get_session().get_service_model(name)


def operation(service: str, name: str) -> OperationModel | None:
    model = service_model(service)
    return model.operation_model(name) if name in model.operation_names else None


def enum_values(service: str, shape_name: str) -> list[str]:
    return list(service_model(service).shape_for(shape_name).enum)


_JAVA_CLASSES = {
    r"\p{ASCII}": r"[\x00-\x7F]",
    r"\p{Print}": r"[\x20-\x7E]",
    r"\z": r"\Z",
}


@functools.cache
def _compiled(pattern: str) -> re.Pattern[str] | None:
    """AWS patterns are Java regexes matched against the whole value; None when Python cannot read one."""
    translated = pattern
    for java, python in _JAVA_CLASSES.items():
        translated = translated.replace(java, python)
    try:
        return re.compile(translated, re.DOTALL)
    except re.error:
        return None


def _camel(name: str) -> str:
    return name[:1].lower() + name[1:]


def _show(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"'{str(value).lower()}'"
    if isinstance(value, (list, dict)):
        return "[...]" if isinstance(value, list) else "{...}"
    return f"'{value}'"


class _Walker:
    def __init__(self) -> None:
        self.problems: list[str] = []

    def fail(self, value: Any, path: str, constraint: str) -> None:
        at = f" at '{path}'" if path else ""
        self.problems.append(f"Value {_show(value)}{at} failed to satisfy constraint: {constraint}")

    def walk(self, shape: Shape, value: Any, path: str) -> None:
        kind = shape.type_name
        meta = shape.metadata
        if kind == "structure":
            if not isinstance(value, dict):
                self.fail(value, path, "Member must be a structure")
                return
            for required in shape.required_members:
                if value.get(required) is None:
                    self.fail(None, _join(path, required), "Member must not be null")
            for name, member in shape.members.items():
                if value.get(name) is not None:
                    self.walk(member, value[name], _join(path, name))
        elif kind == "list":
            if not isinstance(value, list):
                self.fail(value, path, "Member must be a list")
                return
            self._length(value, len(value), meta, path)
            for i, item in enumerate(value, start=1):
                self.walk(shape.member, item, f"{path}.{i}.member")
        elif kind == "map":
            if not isinstance(value, dict):
                self.fail(value, path, "Member must be a map")
                return
            self._length(value, len(value), meta, path)
            for key, item in value.items():
                self.walk(shape.key, key, f"{path}.key")
                self.walk(shape.value, item, f"{path}.{key}")
        elif kind == "string":
            if not isinstance(value, str):
                self.fail(value, path, "Member must be a string")
                return
            if shape.enum and value not in shape.enum:
                self.fail(value, path, f"Member must satisfy enum value set: [{', '.join(shape.enum)}]")
                return
            self._length(value, len(value), meta, path)
            pattern = meta.get("pattern")
            if pattern and (compiled := _compiled(pattern)) and not compiled.fullmatch(value):
                self.fail(value, path, f"Member must satisfy regular expression pattern: {pattern}")
        elif kind in ("integer", "long", "float", "double"):
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                self.fail(value, path, f"Member must be a number ({kind})")
                return
            if kind in ("integer", "long") and not float(value).is_integer():
                self.fail(value, path, "Member must be an integer")
            if "min" in meta and value < meta["min"]:
                self.fail(value, path, f"Member must have value greater than or equal to {meta['min']}")
            if "max" in meta and value > meta["max"]:
                self.fail(value, path, f"Member must have value less than or equal to {meta['max']}")
        elif kind == "boolean":
            if not isinstance(value, bool):
                self.fail(value, path, "Member must be a boolean")
        # timestamps, blobs and documents arrive already serialised by the client; nothing to check

    def _length(self, value: Any, length: int, meta: dict[str, Any], path: str) -> None:
        if "min" in meta and length < meta["min"]:
            self.fail(value, path, f"Member must have length greater than or equal to {meta['min']}")
        if "max" in meta and length > meta["max"]:
            self.fail(value, path, f"Member must have length less than or equal to {meta['max']}")


def _join(path: str, member: str) -> str:
    return f"{path}.{_camel(member)}" if path else _camel(member)


def validation_problems(shape: Shape | None, params: Any) -> list[str]:
    if shape is None:
        return []
    walker = _Walker()
    walker.walk(shape, params if params is not None else {}, "")
    return walker.problems


def format_problems(problems: list[str]) -> str:
    n = len(problems)
    return f"{n} validation error{'s' if n != 1 else ''} detected: " + "; ".join(problems)
