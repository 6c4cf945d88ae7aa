"""One home for each model family's behaviour: the registry the studio's tools iterate.

The catalog (protocol/catalog.py) holds a family's *facts* — its routes, units, prices, pools. Its module here,
`services/families/<name>.py`, holds its *code*: what a backend builds for it on each kind of target (its client,
and for voice its voice library), and the parts the tools ask for — its evaluation variant, its load-test unit of
work, its smoke check. A tool asks `code(name).<part>`; it never compares a family's name. `tests/test_catalog.py`
fails on such a comparison outside the family's own module, and on a catalog family without a module here.

A family module imports its implementation lazily (inside its factories), so using one family — transcribing a
file — builds and imports only that family's client.
"""

from __future__ import annotations

from typing import Any

from protocol.catalog import FAMILY_NAMES
from protocol.errors import ConfigError
from services.families.parts import Build, FamilyCode, SageMakerParts, ServerParts

__all__ = ["Build", "FamilyCode", "SageMakerParts", "ServerParts", "REGISTRY", "code", "having", "build"]


def _registry() -> dict[str, FamilyCode]:
    """Each family module, imported by name here (so the layer rules see the imports), in catalog order; a
    catalog family without a module, or a module the catalog does not know, is an error at import."""
    from services.families import image, listen, omni, sound, video, voice

    found = {f.name: f for f in (m.FAMILY for m in (voice, image, video, listen, omni, sound))}
    missing, unknown = set(FAMILY_NAMES) - set(found), set(found) - set(FAMILY_NAMES)
    if missing or unknown:
        raise LookupError(f"services/families: no module for {sorted(missing)}; not in the catalog: {sorted(unknown)}")
    return {name: found[name] for name in FAMILY_NAMES}


REGISTRY: dict[str, FamilyCode] = _registry()
# Every client name a backend can be asked for, and the family whose module builds it.
CLIENTS: dict[str, tuple[str, Build]] = {part: (f.name, b) for f in REGISTRY.values() for part, b in f.clients.items()}


def code(name: str) -> FamilyCode:
    """The behaviour of the family called `name`; KeyError names the known ones."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise KeyError(f"no model family {name!r}; the studio has {', '.join(REGISTRY)}") from None


def having(part: str) -> tuple[str, ...]:
    """The families that have `part` (e.g. "evaluation", "load", "smoke"), in catalog order."""
    return tuple(name for name, f in REGISTRY.items() if getattr(f, part) is not None)


def build(part: str, kind: str, parts: ServerParts | SageMakerParts) -> Any:
    """Build the client called `part` on a target; ConfigError when no family has it there."""
    try:
        family, how = CLIENTS[part]
    except KeyError:
        raise ConfigError(f"no family has a client called {part!r}; known: {', '.join(CLIENTS)}") from None
    factory = how.sagemaker if isinstance(parts, SageMakerParts) else how.server
    if factory is None:
        raise ConfigError(f"the {family} family has no {part} client on a {kind} target")
    return factory(parts)
