"""Hand it over as code: for a kept item, the script that makes it again, unchanged (issue #36).

    code = generate(history, item_id, "python")   # "python" | "curl" | "cli"
    code.text          # the script: its target in constants at its top (BASE_URL, OUT, each reference file),
                       # each overridable by an environment variable of the same name
    code.files         # the reference files the script reads, {name: bytes} (written beside it)
    code.notes         # what the reader should know (a reference deleted since, a target that may be gone)

items.py reads an item (a job, a speech take, a transcript) back into the request its family's client sent; a
generator per kind of target writes the code — server.py for the offline engine and any vLLM-Omni server by URL
(services/kinds.py), sagemaker.py (its shell forms in sagemaker_shell.py) for a SageMaker endpoint: boto3's
invoke_endpoint / invoke_endpoint_async and the HTTP/2 bidirectional stream, with ENDPOINT_NAME and REGION at the
top (read from the item's kept target by items.sagemaker_target) and credentials from boto3's chain, never written.
Someone else's item the reader may not see is refused as the history refuses it; an unknown id raises UnknownItem.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from types import ModuleType
from typing import Literal

from protocol.errors import InvalidInput, StudioError
from services.code.clip import CLIP_ROUTE
from services.code.items import LOCAL_ENGINE_NOTE, Item, UnknownItem, find, job_item, located
from services.history import History

Lang = Literal["python", "curl", "cli"]
LANGS: tuple[str, ...] = ("python", "curl", "cli")
SUFFIXES = {"python": ".py", "curl": ".sh", "cli": ".sh"}


@dataclass(frozen=True)
class Code:
    item: Item
    lang: str
    text: str
    files: dict[str, bytes]  # the reference files still kept, to write beside the script
    notes: tuple[str, ...]

    @property
    def packages(self) -> tuple[str, ...]:
        """What `pip install` needs for the Python form, pinned as the studio pins it (none for curl and the CLI)."""
        from services.code.packages import needs
        return needs(self.text) if self.lang == "python" else ()

    @property
    def settings(self) -> tuple[str, ...]:
        """The constants at the script's top that say where it goes: BASE_URL, or ENDPOINT_NAME and REGION."""
        if endpoints := self.item.request.get("endpoints"):  # a conversation on SageMaker: one per role
            return (*endpoints, "REGION")
        return ("ENDPOINT_NAME", "REGION") if self.item.target_kind == "sagemaker" else ("BASE_URL",)


def _server() -> ModuleType:
    from services.code import server
    return server


def _clip_sagemaker() -> ModuleType:
    from services.code import clip_sagemaker
    return clip_sagemaker


def _sagemaker() -> ModuleType:
    from services.code import sagemaker
    return sagemaker


def _conversation() -> ModuleType:
    from services.code import conversation
    return conversation


def _conversation_sagemaker() -> ModuleType:
    from services.code import conversation_sagemaker
    return conversation_sagemaker


# Each target kind's generator (a module with python(item), curl(item), cli(item)): "offline" is the embedded
# engine, which speaks the server's protocol; a conversation's (its setup and one turn) has a reader of its own,
# and one held on SageMaker endpoints a generator of its own (conversation_sagemaker.py).
GENERATORS = {"offline": _server, "server": _server, "sagemaker": _sagemaker, "conversation": _conversation,
              "conversation-sagemaker": _conversation_sagemaker}


def generate(history: History, item_id: str, lang: str = "python", *,
             servers: Iterable[str] | None = None) -> Code:
    """The `lang` code that makes item `item_id` again (as the history's actor sees it). `servers`: the base URLs
    of the studio's registered vLLM-Omni servers (services/targets.py `TargetBook.servers()`), when known — an item
    made on a server no longer among them still gets its code, with a note saying so."""
    if lang not in LANGS:
        raise InvalidInput(f"no code in {lang!r}: one of {', '.join(LANGS)}")
    return generate_all(history, item_id, servers=servers, langs=(lang,))[lang]


def generate_all(history: History, item_id: str, *, servers: Iterable[str] | None = None,
                 langs: Iterable[str] = LANGS) -> dict[str, Code]:
    """Every form in `langs` of item `item_id`'s code, the item read from the history once (a page's Code panel
    draws all three)."""
    conversations = _conversation()
    item = conversations.read(history, item_id, servers=servers) if conversations.owns(item_id) else _find(history, item_id)
    known = None if servers is None else {url.rstrip("/") for url in servers}
    if known is not None and item.made_on in known and item.target_kind == "offline":  # a registered local server
        item = replace(item, target_kind="server", base_url=item.made_on,
                       notes=tuple(n for n in item.notes if not n.startswith(LOCAL_ENGINE_NOTE)))
    if known is not None and item.target_kind == "server" and item.base_url not in known:
        item = replace(item, notes=(*item.notes, f"{item.base_url}, where it was made, is no longer one of the "
                                    "studio's servers: the code still calls it (set BASE_URL for another)"))
    if item.target_kind == "server" and not history.actor.can("generate"):
        item = _address_withheld(item)
    load = GENERATORS.get(item.target_kind)
    if item.route == CLIP_ROUTE and item.target_kind == "sagemaker":  # a clip's parts asked of two endpoints
        load = _clip_sagemaker
    if load is None:
        raise InvalidInput(f"{item.id} was made on {item.target} ({item.target_kind}); code for that kind of target "
                           "is not written yet — only for the offline engine, vLLM-Omni servers and SageMaker endpoints")
    files = {name: data for name, data in item.files.items() if data is not None}
    return {lang: Code(item, lang, getattr(load(), lang)(item), files, item.notes) for lang in langs}


def _find(history: History, item_id: str) -> Item:
    """A kept item, each record read once: a job — a clip (a video job the studio muxed, services/code/clip.py) or
    any other (items.job_item) —, an evaluation's item (services/code/evaluation.py), a take or a transcript."""
    from services.code import evaluation
    from services.code.clip import clip_item

    try:
        job = history.jobs.get(item_id)
    except StudioError:
        job = None
    if job is not None:
        return clip_item(history, job) if job.meta.get("clip") else located(job_item(history, job))
    try:
        return evaluation.read(history, item_id, find=_find)
    except evaluation.NotAnEvalItem:
        return find(history, item_id, jobs=False)


def _address_withheld(item: Item) -> Item:
    """A viewer's copy of a server item's code: the server's address left out (creators and admins, who pick
    targets, see it) — BASE_URL must be set to run it."""
    where = (item.base_url, item.made_on, item.target)
    return replace(item, base_url="", made_on="", target="one of the studio's vLLM-Omni servers",
                   notes=(*(n for n in item.notes if not any(w and w in n for w in where)), ADDRESS_WITHHELD))


ADDRESS_WITHHELD = ("the server's address is shown to the studio's creators and admins only: set BASE_URL to it "
                    "(an admin can tell you) before running the code")

__all__ = ["LANGS", "Code", "Item", "UnknownItem", "generate", "generate_all"]
