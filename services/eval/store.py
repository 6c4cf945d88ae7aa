"""Evaluations kept in the studio's history database (services/history), media beside it.

Tables (in services/history/tables.py with the history's own): `evaluations` (the checked SPEC), `eval_items` (one per
variant × prompt × repeat, created up front as `pending`: its settings, then its media file, figures, status
and error), `eval_ratings` (item_a, item_b, winner a|b|tie, rater). A run only generates the items that are not
`succeeded`, so an interrupted run continues where it stopped. Item ids are random (they say nothing of the
variant: a blind sheet shows them).

An evaluation belongs to whoever made it (`user_id`; `shared` with the team by `set_shared`), and each rating
records who rated (`user_id`, beside the rater's name). The store acts for its history's actor
(services/history): creating or rating needs the role to "evaluate", running an evaluation's items is its
owner's, `list` and `get` show their own and the shared ones. Every write goes through the history's one
write transaction (`History.transaction`).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from protocol.errors import InvalidInput, StudioError
from services.access import LOCAL, Forbidden, require
from protocol.catalog import FAMILIES
from services.eval.kept import KeptItem
from services.eval.kept import resolve as resolve_kept
from services.eval.spec import EvalSpec, check_catalog
from services.history import History

ItemStatus = Literal["pending", "succeeded", "failed"]
MEDIA_SUFFIX = {f.name: f.media_suffix for f in FAMILIES}


def outputs_record(eval_id: str) -> str:
    """The media record holding an evaluation's outputs (one file per item; the name of its folder before media
    stores, so an older studio's files are found where they are)."""
    return f"eval-{eval_id}"


def recordings_record(eval_id: str) -> str:
    """The media record holding a listen evaluation's recordings, copied in when it was made."""
    return f"eval-{eval_id}-audio"



@dataclass(frozen=True)
class Item:
    id: str
    evaluation_id: str
    variant: str
    prompt_index: int
    repeat: int
    prompt: str
    settings: dict[str, Any]
    status: ItemStatus
    media: str | None
    figures: dict[str, Any]
    error: str | None


@dataclass(frozen=True)
class Rating:
    item_a: str
    item_b: str
    winner: Literal["a", "b", "tie"]
    rater: str
    created_at: float
    user_id: str = LOCAL.id  # who rated (the signed-in person; `rater` is the name they gave)


@dataclass(frozen=True)
class Evaluation:
    id: str
    name: str
    modality: str
    spec: EvalSpec
    created_at: float
    user_id: str = LOCAL.id
    shared: bool = False


def _item(row: Any) -> Item:
    return Item(row["id"], row["evaluation_id"], row["variant"], row["prompt_index"], row["repeat"], row["prompt"],
                json.loads(row["settings"]), row["status"], row["media"], json.loads(row["figures"]), row["error"])


class EvalStore:
    """Evaluations in the history at `data_dir` (or an open History, acting for its actor)."""

    def __init__(self, history: History | Path | str) -> None:
        self.history = history if isinstance(history, History) else History(history)

    @property
    def actor(self):
        return self.history.actor

    # -- evaluations ----------------------------------------------------------------------------------
    def create(self, spec: EvalSpec, *, targets: Any = None, offer: Any = None) -> Evaluation:
        """A new evaluation of the actor's (Forbidden unless their role may evaluate) with every item `pending`.
        `targets` (a services.targets.TargetBook) checks the variants' targets against the studio's closed set
        first, as the pages create them; running it checks again either way. `offer` (services.eval.runner
        .target_offer) checks what a variant picks of its target's offer (voice: its voice and language). A variant
        of kept results (services/eval/kept.py) has its items made already, their prompts joining the prompt set."""
        require(self.actor, "evaluate")
        self._check(spec, targets, offer)
        spec, kept = resolve_kept(self.history, spec)  # results from the history read first: their prompts join
        eval_id = f"ev-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
        now = time.time()
        self._keep_recordings(eval_id, spec)
        names = self._write_kept(eval_id, spec, kept)  # files before the rows that name them
        with self.history.transaction() as db:
            db.execute("INSERT INTO evaluations (id, name, modality, spec, created_at, user_id)"
                       " VALUES (?, ?, ?, ?, ?, ?)",
                       (eval_id, spec.name, spec.modality, spec.model_dump_json(), now, self.actor.id))
            self._add_items(db, eval_id, spec, now)
            self._add_kept(db, eval_id, kept, names, now)
        return self.get(eval_id)

    def _check(self, spec: EvalSpec, targets: Any, offer: Any) -> None:
        if targets is not None:
            targets.check_variant_keys(self.actor, spec.modality, spec.variants)
        if offer is not None:
            check_catalog(spec, offer)

    def _changeable(self, eval_id: str, doing: str) -> Evaluation:
        """The evaluation, when the actor may edit or delete it: a role that may evaluate, and it theirs (or they
        an admin)."""
        require(self.actor, "evaluate")
        ev = self.get(eval_id)
        self.history.check_changeable(ev, doing, f"evaluation {eval_id}")
        return ev

    def update(self, eval_id: str, spec: EvalSpec, *, targets: Any = None, offer: Any = None) -> Evaluation:
        """Change the evaluation's name, prompts, repeats and variants (checked as `create` checks them), only while
        nobody has rated it: its items are made afresh (all `pending`, the old outputs removed)."""
        ev = self._changeable(eval_id, "edit")
        if spec.modality != ev.modality:
            raise InvalidInput(f"evaluation {eval_id} is a {ev.modality} evaluation: its modality cannot change — "
                               "make a new evaluation instead")
        self._check(spec, targets, offer)
        spec, kept = resolve_kept(self.history, spec)
        with self.history.transaction() as db:  # the ratings counted in the same transaction as the change
            rated = db.execute("SELECT COUNT(*) FROM eval_ratings WHERE evaluation_id = ?", (eval_id,)).fetchone()[0]
            if rated:
                raise InvalidInput(f"evaluation {eval_id} has {rated} rating{'' if rated == 1 else 's'}: what was rated "
                                   "stays as it was — make a new evaluation from its SPEC instead")
            db.execute("UPDATE evaluations SET name = ?, spec = ? WHERE id = ?",
                       (spec.name, spec.model_dump_json(), eval_id))
            db.execute("DELETE FROM eval_items WHERE evaluation_id = ?", (eval_id,))
            self._add_items(db, eval_id, spec, time.time())
        self.history.remove_files(outputs_record(eval_id), f"evaluation {eval_id}'s old outputs")
        if kept:  # the kept results' copies after the old outputs are gone, then their rows
            names = self._write_kept(eval_id, spec, kept)
            with self.history.transaction() as db:
                self._add_kept(db, eval_id, kept, names, time.time())
        self._keep_recordings(eval_id, spec)
        return self.get(eval_id)

    def delete(self, eval_id: str) -> None:
        """Delete the evaluation, its items and ratings, then its outputs' folder: its owner or an admin."""
        self._changeable(eval_id, "delete")
        with self.history.transaction() as db:  # the rows first: no record names a file that is gone
            for table, column in (("eval_ratings", "evaluation_id"), ("eval_items", "evaluation_id"),
                                  ("evaluations", "id")):
                db.execute(f"DELETE FROM {table} WHERE {column} = ?", (eval_id,))
        self.history.remove_files(outputs_record(eval_id), f"evaluation {eval_id}")
        self.history.remove_files(recordings_record(eval_id), f"evaluation {eval_id}")

    def recording_name(self, ev: Evaluation, index: int) -> str:
        """The name a listen evaluation keeps item `index`'s recording under (copied in when it was made)."""
        return f"{index:04d}{Path(ev.spec.audio[index]).suffix.lower() or '.audio'}"

    def recording(self, ev: Evaluation, index: int) -> bytes | None:
        """Recording `index` of a listen evaluation, as kept; None when it is gone."""
        try:
            return self.history.media.get(recordings_record(ev.id), self.recording_name(ev, index))
        except StudioError:
            return None

    def _keep_recordings(self, eval_id: str, spec: EvalSpec) -> None:
        """A listen evaluation's recordings copied into the store (all read first: a path may be the old copy), so
        an uploaded file or a moved one stays evaluable."""
        if not spec.audio:
            return
        try:
            datas = [Path(p).read_bytes() for p in spec.audio]
        except OSError as exc:
            raise InvalidInput(f"a recording could not be read ({exc.strerror or exc}: {exc.filename}): give it "
                               "again") from None
        ev = Evaluation(eval_id, spec.name, spec.modality, spec, 0.0)
        self.history.remove_files(recordings_record(eval_id), f"evaluation {eval_id}'s old recordings")
        self.history.write_files(recordings_record(eval_id),
                                 {self.recording_name(ev, index): data for index, data in enumerate(datas)})

    def set_shared(self, eval_id: str, shared: bool) -> None:
        """Share the evaluation (its outputs, ratings and results) with the team, or stop: its owner or an admin."""
        self.history.set_shared("evaluation", eval_id, shared)

    def check_runner(self, eval_id: str) -> Evaluation:
        """The evaluation, when the actor may generate its items: a role that may evaluate, and it theirs."""
        require(self.actor, "evaluate")
        ev = self.get(eval_id)
        if not self.history.owns(ev):
            raise Forbidden(f"{self.actor.label} may not run {ev.user_id}'s evaluation {eval_id}: only the one who "
                            "made it runs its items (rate it, or make your own from its SPEC)")
        return ev

    def _write_kept(self, eval_id: str, spec: EvalSpec, kept: list[KeptItem]) -> list[str]:
        suffix = MEDIA_SUFFIX[spec.modality]
        return self.history.write_files(outputs_record(eval_id), {k.id + suffix: k.data for k in kept})

    def _add_kept(self, db: Any, eval_id: str, kept: list[KeptItem], names: list[str], now: float) -> None:
        """Results from the history as items already made (services/eval/kept.py)."""
        for k, name in zip(kept, names):
            db.execute("INSERT INTO eval_items (id, evaluation_id, variant, prompt_index, repeat, prompt, settings,"
                       " status, media, figures, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'succeeded', ?, ?, ?)",
                       (k.id, eval_id, k.variant, k.prompt_index, k.repeat, k.prompt, json.dumps(k.settings), name,
                        json.dumps(k.figures), now))

    def _add_items(self, db: Any, eval_id: str, spec: EvalSpec, now: float) -> None:
        """Every item a variant makes, `pending` (a variant of kept results makes none)."""
        for label in spec.labels:
            if spec.settings(label).get("kept"):
                continue
            settings = json.dumps(spec.settings(label))
            for pi, prompt in enumerate(spec.prompts):
                for r in range(spec.repeats):
                    db.execute(
                        "INSERT INTO eval_items (id, evaluation_id, variant, prompt_index, repeat, prompt,"
                        " settings, status, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?) ON CONFLICT DO NOTHING",
                        (uuid.uuid4().hex[:10], eval_id, label, pi, r, prompt, settings, now))

    def get(self, eval_id: str) -> Evaluation:
        """The evaluation; someone else's unshared one is refused like a missing one."""
        condition, args = self.history.visible()
        row = self.history.reader().execute(f"SELECT * FROM evaluations WHERE id = ? AND {condition}",
                                            (eval_id, *args)).fetchone()
        if row is None:
            raise InvalidInput(f"there is no evaluation {eval_id!r} in the history at {self.history.data_dir}; "
                               "`python -m services eval list` shows them")
        return Evaluation(row["id"], row["name"], row["modality"], EvalSpec.model_validate_json(row["spec"]),
                          row["created_at"], row["user_id"], bool(row["shared"]))

    def list(self) -> list[dict[str, Any]]:
        """The actor's evaluations and those others shared, newest first, with their item counts by status, their
        number of ratings, whose they are (`user_id`) and `shared`."""
        db = self.history.reader()
        condition, args = self.history.visible()
        out = []
        for row in db.execute(f"SELECT * FROM evaluations WHERE {condition} ORDER BY {self.history.newest_first}",
                              args).fetchall():
            counts = dict(db.execute("SELECT status, COUNT(*) FROM eval_items WHERE evaluation_id = ? GROUP BY status",
                                     (row["id"],)).fetchall())
            ratings = db.execute("SELECT COUNT(*) FROM eval_ratings WHERE evaluation_id = ?", (row["id"],)).fetchone()[0]
            out.append({"id": row["id"], "name": row["name"], "modality": row["modality"],
                        "created_at": row["created_at"], "items": sum(counts.values()),
                        "succeeded": counts.get("succeeded", 0), "failed": counts.get("failed", 0),
                        "pending": counts.get("pending", 0), "ratings": ratings, "user_id": row["user_id"],
                        "shared": bool(row["shared"])})
        return out

    def check_resume(self, eval_id: str, spec: EvalSpec) -> Evaluation:
        """The evaluation to continue; refused when the SPEC given is not the one it was made from (its kept
        results' prompts added, as they were when it was made)."""
        ev = self.get(eval_id)
        if any(v.get("kept") for v in spec.variants):
            spec = resolve_kept(self.history, spec)[0]
        old, new = ev.spec.model_dump(), spec.model_dump()
        changed = [k for k in new if old.get(k) != new[k]]
        if changed:
            raise InvalidInput(f"the SPEC differs from evaluation {eval_id}'s in {', '.join(changed)}; resume it with "
                               "the SPEC it was made from, or run a new evaluation")
        return ev

    # -- items ----------------------------------------------------------------------------------------
    def items(self, eval_id: str, *, status: ItemStatus | None = None) -> list[Item]:
        sql = "SELECT * FROM eval_items WHERE evaluation_id = ?" + (" AND status = ?" if status else "")
        sql += " ORDER BY prompt_index, repeat, variant"
        rows = self.history.reader().execute(sql, (eval_id, status) if status else (eval_id,)).fetchall()
        return [_item(r) for r in rows]

    def item(self, item_id: str) -> Item:
        row = self.history.reader().execute("SELECT * FROM eval_items WHERE id = ?", (item_id,)).fetchone()
        if row is None:
            raise InvalidInput(f"there is no evaluation item {item_id!r}")
        return _item(row)

    def media(self, item: Item) -> bytes | None:
        """The item's output (WAV, PNG, MP4, transcript text), or None when it has none or it is gone."""
        if item.media is None:
            return None
        try:
            return self.history.media.get(outputs_record(item.evaluation_id), item.media)
        except StudioError:
            return None

    def succeed(self, item: Item, data: bytes, figures: dict[str, Any], modality: str) -> None:
        """The item's media written (whole) before the row that names it."""
        [name] = self.history.write_files(outputs_record(item.evaluation_id), {item.id + MEDIA_SUFFIX[modality]: data})
        with self.history.transaction() as db:
            db.execute("UPDATE eval_items SET status = 'succeeded', media = ?, figures = ?, error = NULL, updated_at = ?"
                       " WHERE id = ?", (name, json.dumps(figures), time.time(), item.id))

    def fail(self, item: Item, error: str) -> None:
        with self.history.transaction() as db:
            db.execute("UPDATE eval_items SET status = 'failed', error = ?, updated_at = ? WHERE id = ?",
                       (error, time.time(), item.id))

    # -- ratings --------------------------------------------------------------------------------------
    def add_ratings(self, eval_id: str, rows: list[tuple[str, str, str, str]], *, skip_rated: bool = False) -> int:
        """(item_a, item_b, winner, rater) rows (checked by the caller), all in one transaction, the actor's
        (Forbidden unless their role may evaluate) on an evaluation they see (their own or a shared one); the
        number added. `skip_rated`: a row whose pair (in either order) its rater already rated is left out, read
        in the same transaction so two imports at once cannot both add it."""
        require(self.actor, "evaluate")
        self.get(eval_id)
        now = time.time()
        with self.history.transaction() as db:
            if skip_rated:
                rated = {(frozenset((a, b)), r) for a, b, r in db.execute(
                    "SELECT item_a, item_b, rater FROM eval_ratings WHERE evaluation_id = ?", (eval_id,))}
                rows = [row for row in rows if (frozenset(row[:2]), row[3]) not in rated]
            db.executemany("INSERT INTO eval_ratings (evaluation_id, item_a, item_b, winner, rater, created_at,"
                           " user_id) VALUES (?, ?, ?, ?, ?, ?, ?)",
                           [(eval_id, a, b, w, r, now, self.actor.id) for a, b, w, r in rows])
        return len(rows)

    def ratings(self, eval_id: str) -> list[Rating]:
        rows = self.history.reader().execute(
            "SELECT * FROM eval_ratings WHERE evaluation_id = ? ORDER BY id", (eval_id,)).fetchall()
        return [Rating(r["item_a"], r["item_b"], r["winner"], r["rater"], r["created_at"], r["user_id"]) for r in rows]
