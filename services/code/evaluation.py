"""An evaluation's item as code: the request its variant's settings make for its prompt (services/eval: each family's
`EvalFamily.request`), sent to the variant's target — the same code a kept item of that family gets.

    item = read(history, "3f9c0a1b2d")   # an evaluation item's id (items.csv of `python -m services eval export`)

A variant of kept results (`kept = [ids]`) hands over the kept item's own code. A variant without a target of its
own ran on the studio's default target, which the evaluation does not keep: the code calls the offline engine's
address, with a note. Only items of evaluations the reader may see are read (as the evaluation store decides).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from protocol import catalog
from protocol.errors import InvalidInput, StudioError
from protocol.images import IMAGES_PATH
from protocol.listen import TRANSCRIPTIONS_PATH
from protocol.sound import SOUND_PATH
from protocol.videos import VIDEO_SYNC_PATH
from protocol.sagemaker import DEFAULT_REGION
from services.code.items import _BODIES, ENGINE_URL, SPEECH_PATH, Item, _target, find, located
from services.history import History

ROUTES = (*_BODIES, SPEECH_PATH, TRANSCRIPTIONS_PATH)  # the routes an evaluation item's code can be written for
NOT_SENT = {"type", "label", "kept", "backend", "url", "endpoint", "region", "profile", "state_file"}


class NotAnEvalItem(InvalidInput):
    """The id is no evaluation item (another kind of item, or none): the other readers look."""


def read(history: History, item_id: str, *, find: Callable[[History, str], Item] = find) -> Item:
    """Evaluation item `item_id`; a kept-results variant's is the kept item's, read by `find` (services.code's
    reader, which knows clips too). NotAnEvalItem when it is none."""
    from services.eval import EvalStore, build_request

    store = EvalStore(history)
    try:
        record = store.item(item_id)
    except StudioError:
        raise NotAnEvalItem(f"{item_id} is not an evaluation item") from None
    ev = store.get(record.evaluation_id)  # someone else's unshared evaluation: refused as the store refuses it
    settings = dict(record.settings)
    if settings.get("kept"):
        item = find(history, str(settings["kept"]))
        return dataclasses.replace(item, id=record.id, notes=(
            f"evaluation {ev.id}'s item {record.id} (variant {record.variant}) is the kept {item.noun} "
            f"{settings['kept']}: its own code", *item.notes))
    routes = catalog.family(ev.modality).routes
    route = next((r for r in ROUTES if r in routes), None)
    if route is None:
        raise InvalidInput(f"evaluation {ev.id} is of {ev.modality}: code for its items is not written yet")
    request = build_request(ev.modality, record.prompt, settings)
    target, notes = _variant_target(settings)
    kind_, base, more = _target(target)
    body, files, command = _body(route, request, record, ev, store)
    what = f"evaluation {ev.id} ({ev.name}), variant {record.variant}"
    item = Item(record.id, route, f"evaluation item of {what}", command, record.prompt, body, target, kind_, base,
                base if kind_ != "sagemaker" else "", files, tuple(notes + more))
    return located(item)


def _variant_target(settings: dict[str, Any]) -> tuple[str, list[str]]:
    if settings.get("url"):
        return str(settings["url"]).rstrip("/"), []
    if settings.get("endpoint"):
        return f"sagemaker:{settings.get('region') or DEFAULT_REGION}/{settings['endpoint']}", []
    return ENGINE_URL, ["this variant ran on the studio's default target, which the evaluation does not keep: the "
                        "code calls the offline engine's address (set BASE_URL for the server it ran on)"]


def _body(route: str, request: Any, record: Any, ev: Any, store: Any) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(the request as sent, the files it reads, the studio's command) for the item's route."""
    if route in _BODIES:  # a job's request class: its fields are a job's params
        params = {f.name: getattr(request, f.name) for f in dataclasses.fields(request)}
        params = {k: v for k, v in params.items() if not isinstance(v, bytes)}
        return _BODIES[route](params, []), {}, _COMMANDS[route]
    if route == SPEECH_PATH:  # a session.config, streamed as a take is
        config = request.model_dump(mode="json", exclude_none=True, exclude=NOT_SENT)
        return {**config, "input": record.prompt}, {}, "speak"
    name = store.recording_name(ev, record.prompt_index)  # a listen evaluation's recording, copied in when made
    try:
        data = store.recording(ev, record.prompt_index)
    except StudioError:
        data = None
    body = {"model": request.get("model"), "file": name, **({"language": request["language"]}
                                                              if request.get("language") else {})}
    return {k: v for k, v in body.items() if v is not None}, {name: data}, "listen"


_COMMANDS = {IMAGES_PATH: "image", VIDEO_SYNC_PATH: "video", SOUND_PATH: "sound"}  # the studio's command per route
