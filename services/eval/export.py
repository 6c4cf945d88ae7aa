"""Export an evaluation as a ZIP, and import ratings filled in elsewhere.

- `export_zip(store, id)`: `media/<item id>.<wav|png|mp4>`, `items.csv` (id, variant, prompt, status, figures,
  settings), `ratings.csv` (item_a, item_b, winner, rater, created_at) and `report.html` (self-contained: no
  network, no script; the media linked relatively, so it plays once the ZIP is unpacked). A media file gone from
  the data folder is not left out silently: `MISSING.txt` lists it (item, file, where it was looked for), and the
  pages show "missing" in its place.
- `export_zip(store, id, blind=True)`: a blind sheet for raters without the studio: `blind.html` (the
  scheduled pairs, shuffled, each as "1" and "2" with the prompt, no labels), `ratings.csv` to fill in (item_a,
  item_b, winner, rater; winner empty) and the media of those pairs only.
- `import_ratings(store, id, csv_bytes)`: columns item_a, item_b, winner (a | b | tie), rater. A row whose
  winner is empty is a pair not rated (skipped). Any bad row (unknown item id, a pair that is not two variants'
  outputs for one prompt, another winner, no rater, the same pair by the same rater twice in the file) rejects
  the whole file naming its line: nothing imported. A rater rates a pair once: a row whose pair (in either order)
  that rater already has a rating for is not added again, so importing one file twice counts it once
  (`import_ratings_outcome` says how many were added and how many were already there).

Every CSV cell is written through services/csvcells.py (a text a spreadsheet would run as a formula gets a
leading quote) and read back through it, so an exported ratings.csv imports exactly as it was.
"""

from __future__ import annotations

import csv
import html
import io
import json
import zipfile
from dataclasses import dataclass
from typing import Any

from protocol.errors import InvalidInput
from services.csvcells import to_csv, unguard
from services.eval.pairing import check_pair, schedule
from services.eval.registry import evaluation
from services.eval.report import results, to_html
from services.eval.stats import WINNERS
from services.eval.store import EvalStore, Item

RATING_COLUMNS = ("item_a", "item_b", "winner", "rater")
ITEM_COLUMNS = ("id", "variant", "prompt_index", "repeat", "prompt", "status", "media", "latency_s", "ttfa_ms",
                "rtf", "model_s", "cost_usd", "errors", "words", "wer", "intel_wer", "intel_transcript", "error",
                "settings")


# An output's tag in the exported HTML, by the major type of what its family makes (EvalFamily.makes).
TAGS = {
    "audio": lambda src: f'<audio controls preload="none" src="{src}"></audio>',
    "image": lambda src: f'<img src="{src}" style="max-width:420px" alt="">',
    "video": lambda src: f'<video controls preload="none" src="{src}" style="max-width:420px"></video>',
    "text": lambda src: f'<a href="{src}">transcript</a>',
}


def _media_tag(makes: str, src: str, missing: bool = False) -> str:
    src = html.escape(src)
    if missing:
        return f"<em>missing: {src} (see MISSING.txt)</em>"
    tag = TAGS.get(makes.partition("/")[0])
    return tag(src) if tag else f'<a href="{src}">output</a>'


def _item_row(item: Item) -> dict[str, Any]:
    f = item.figures
    return {"id": item.id, "variant": item.variant, "prompt_index": item.prompt_index, "repeat": item.repeat,
            "prompt": item.prompt, "status": item.status, "media": f"media/{item.media}" if item.media else None,
            **{k: f.get(k) for k in ("latency_s", "ttfa_ms", "rtf", "model_s", "cost_usd", "errors", "words", "wer",
                                     "intel_wer", "intel_transcript")}, "error": item.error,
            "settings": json.dumps(item.settings)}


def export_zip(store: EvalStore, eval_id: str, *, blind: bool = False) -> bytes:
    ev = store.get(eval_id)
    part = evaluation(ev.modality)
    items = store.items(eval_id)
    by_id = {i.id: i for i in items}
    kept = {i.id: data for i in items if i.media and (data := store.media(i)) is not None}
    gone = {i.id for i in items if i.media and i.id not in kept}

    def tag(item: Item) -> str:
        return _media_tag(part.makes, f"media/{item.media}", missing=item.id in gone)

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        if blind:
            pairs = schedule(store, eval_id)
            shown: set[str] = set()
            rows, sheet = [], []
            for n, p in enumerate(pairs, 1):
                a, b = by_id[p.item_a], by_id[p.item_b]
                shown |= {a.id, b.id}
                rows.append({"item_a": a.id, "item_b": b.id, "winner": "", "rater": ""})
                sheet.append(f"<tr><td>{n}</td><td>{html.escape(p.prompt)}</td>"
                             f"<td>1 <code>{a.id}</code><br>{tag(a)}</td>"
                             f"<td>2 <code>{b.id}</code><br>{tag(b)}</td></tr>")
            z.writestr("ratings.csv", to_csv(rows, RATING_COLUMNS))
            z.writestr("blind.html", f"""<!doctype html><html><head><meta charset="utf-8">
<title>Blind sheet: {html.escape(ev.name)}</title><style>body{{font-family:sans-serif;margin:2em}}
td{{border:1px solid #ccc;padding:6px;vertical-align:top}}table{{border-collapse:collapse}}</style></head><body>
<h1>Blind sheet</h1><p>For each row, listen to or look at 1 and 2, then fill the row of ratings.csv with the same
item_a and item_b: winner <b>a</b> (1 is better), <b>b</b> (2 is better) or <b>tie</b>, and your name as rater.
Leave winner empty to skip a pair. Return the file for <code>python -m services eval import {html.escape(ev.id)}
ratings.csv</code>.</p><table><tr><th>#</th><th>prompt</th><th>1</th><th>2</th></tr>{''.join(sheet)}</table>
</body></html>
""")
            wanted = [by_id[i] for i in sorted(shown)]
        else:
            res = results(store, eval_id)
            z.writestr("items.csv", to_csv([_item_row(i) for i in items], ITEM_COLUMNS))
            z.writestr("ratings.csv", to_csv([{"item_a": r.item_a, "item_b": r.item_b, "winner": r.winner,
                                             "rater": r.rater, "created_at": r.created_at}
                                            for r in store.ratings(eval_id)], (*RATING_COLUMNS, "created_at")))
            gallery = "".join(
                f"<tr><td><code>{i.id}</code></td><td>{html.escape(i.variant)}</td><td>{html.escape(i.prompt)}</td>"
                f"<td>{tag(i)}</td></tr>" for i in items if i.media)
            z.writestr("report.html", to_html(res, extra="<h2>Items</h2><table><tr><th>id</th><th>variant</th>"
                                                         f"<th>prompt</th><th>output</th></tr>{gallery}</table>"))
            wanted = [i for i in items if i.media]
            if part.takes == "audio":  # the recordings heard, as the evaluation keeps them
                for index in range(len(ev.spec.audio)):
                    recording = store.recording(ev, index)
                    if recording is not None:
                        z.writestr(f"audio/{store.recording_name(ev, index)}", recording)
        for item in wanted:
            if item.id in kept:
                z.writestr(f"media/{item.media}", kept[item.id])
        lost = [i for i in wanted if i.id in gone]
        if lost:
            z.writestr("MISSING.txt", "These outputs are named by the evaluation but their files were not found when "
                                      "it was exported (deleted or moved from the studio's media), so they are not "
                                      "in this ZIP:\n" + "".join(f"media/{i.media}\titem {i.id}\tlooked for in "
                                                                 f"{store.history.media.where}\n" for i in lost))
    return buf.getvalue()


def parse_ratings(store: EvalStore, eval_id: str, data: bytes) -> list[tuple[str, str, str, str]]:
    """The ratings in a filled CSV, every row checked; the first bad one raises InvalidInput naming its line."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"the ratings file is not UTF-8 text (byte {exc.start}); save it as UTF-8 CSV") from None
    reader = csv.DictReader(io.StringIO(text))
    header = [h.strip() for h in reader.fieldnames or []]
    missing = [c for c in RATING_COLUMNS if c not in header]
    if missing:
        raise InvalidInput(f"the ratings file has no column(s) {', '.join(missing)} on line 1; the columns are "
                           f"{', '.join(RATING_COLUMNS)}; nothing was imported")
    items = {i.id: i for i in store.items(eval_id)}
    rows = []
    seen: dict[tuple[frozenset[str], str], int] = {}  # (pair, rater) → the line that rated it
    for raw in reader:
        line = reader.line_num
        # the guard quote the export put before a formula-like cell comes off first (services/csvcells.py)
        row = {(k or "").strip(): unguard(v or "").strip() for k, v in raw.items() if isinstance(v, str | None)}
        winner = row.get("winner", "").lower()
        if not winner:
            continue  # not rated
        if winner not in WINNERS:
            raise InvalidInput(f"line {line}: winner must be a, b or tie, not {row.get('winner')!r}; nothing was imported")
        problem = check_pair(items, row.get("item_a", ""), row.get("item_b", ""))
        if problem:
            raise InvalidInput(f"line {line}: {problem}; nothing was imported")
        if not row.get("rater"):
            raise InvalidInput(f"line {line}: the rater is empty: name who rated; nothing was imported")
        key = (frozenset((row["item_a"], row["item_b"])), row["rater"])
        if key in seen:
            raise InvalidInput(f"line {line}: {row['rater']} rated the pair {row['item_a']}, {row['item_b']} already "
                               f"on line {seen[key]}: a rater rates a pair once; keep one of the two rows; nothing "
                               "was imported")
        seen[key] = line
        rows.append((row["item_a"], row["item_b"], winner, row["rater"]))
    return rows


@dataclass(frozen=True)
class ImportOutcome:
    added: int  # ratings added by this import
    already: int  # rated rows whose pair that rater had rated before: not added again

    def text(self, eval_id: str) -> str:
        said = f"imported {self.added} ratings into {eval_id}"
        if self.already:
            said += (f"; {self.already} were already there (the same pair rated by the same rater) and were not "
                     "added again")
        return said


def import_ratings_outcome(store: EvalStore, eval_id: str, data: bytes) -> ImportOutcome:
    """Import a filled ratings CSV, all or nothing: how many were added, and how many were already there."""
    store.get(eval_id)
    rows = parse_ratings(store, eval_id, data)
    added = store.add_ratings(eval_id, rows, skip_rated=True) if rows else 0
    return ImportOutcome(added, len(rows) - added)


def import_ratings(store: EvalStore, eval_id: str, data: bytes) -> int:
    """Import a filled ratings CSV, all or nothing; the number of ratings added (those already there are not)."""
    return import_ratings_outcome(store, eval_id, data).added
