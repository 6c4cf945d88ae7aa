"""The CSVs an evaluation writes (items.csv, ratings.csv, `eval report --format csv`) open in a spreadsheet as data,
never as formulas, and the ratings CSV imports back exactly as it was written; a ratings file imported twice
counts once. Real files: the export's ZIP is unpacked and read with Python's csv module, the import runs both
in process and as `python -m services eval import`."""

from __future__ import annotations

import csv
import io
import sys
import zipfile
from pathlib import Path

import pytest

from protocol.errors import InvalidInput
from services.csvcells import guard, unguard
from services.eval import report
from services.eval.export import export_zip, import_ratings, import_ratings_outcome
from services.eval.spec import parse_spec
from services.eval.store import EvalStore
from services.history import History
from tests.test_speech_cli import ROOT, cli_env
from tests.cli_support import run_cli

FORMULA = "=cmd|' /C calc'!A0"
# raters as people might type them: each one a spreadsheet would run, or one that must survive the guard
RATERS = ['=HYPERLINK("http://127.0.0.1:9/x","click")', "+1+1", "-2+3", "@SUM(A1)", "'=quoted before", "'plain",
          "O'Brien", "Ann"]
STARTS = ("=", "+", "-", "@", "\t", "\r")


def made(tmp_path: Path, labels: tuple[str, str] = ("=1+1", "-minus"),
         url: str | None = None) -> tuple[EvalStore, str]:
    """An evaluation whose prompt and labels are formulas, every item made (no server needed to rate or export),
    in a history on `url` (None: SQLite in the data folder)."""
    store = EvalStore(History(tmp_path / "data", database_url=url))
    ev = store.create(parse_spec({"name": "@evil", "modality": "voice", "prompts": [FORMULA, "second"],
                                  "variants": [{"label": labels[0]}, {"label": labels[1]}]}))
    for item in store.items(ev.id):
        if item.prompt_index == 1 and item.variant == labels[1]:
            store.fail(item, "\t=1+2 an error that begins with a tab")
        elif item.prompt_index == 1:
            store.fail(item, "\r@x an error that begins with a carriage return")
        else:  # a negative figure is the studio's own number: written as a number, not guarded
            store.succeed(item, b"RIFF", {"latency_s": -3.5, "ttfa_ms": 12}, "voice")
    return store, ev.id


def rows_of(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text)))


def assert_no_formula(rows: list[list[str]]) -> None:
    """No cell a spreadsheet would run: each begins with none of = + - @ tab CR, or is a plain number."""
    for row in rows:
        for cell in row:
            if cell.startswith(STARTS):
                float(cell)  # ValueError: a text cell left unguarded


def test_every_csv_guards_formula_cells_and_keeps_numbers(tmp_path: Path) -> None:
    store, eval_id = made(tmp_path)
    pair = [i.id for i in store.items(eval_id) if i.prompt_index == 0]
    store.add_ratings(eval_id, [(pair[0], pair[1], "a", r) for r in RATERS])
    z = zipfile.ZipFile(io.BytesIO(export_zip(store, eval_id)))

    items = rows_of(z.read("items.csv").decode())
    assert_no_formula(items)
    head = items[0]
    by_prompt = [dict(zip(head, r)) for r in items[1:]]
    assert {r["prompt"] for r in by_prompt} == {"'" + FORMULA, "second"}
    assert {r["variant"] for r in by_prompt} == {"'=1+1", "'-minus"}
    assert {r["latency_s"] for r in by_prompt if r["status"] == "succeeded"} == {"-3.5"}  # a number stays a number
    assert {r["error"] for r in by_prompt if r["status"] == "failed"} == {
        "'\t=1+2 an error that begins with a tab", "'\r@x an error that begins with a carriage return"}

    ratings = rows_of(z.read("ratings.csv").decode())
    assert_no_formula(ratings)
    raters = [dict(zip(ratings[0], r))["rater"] for r in ratings[1:]]
    assert raters == ["'" + r if r.startswith((*STARTS, "'")) else r for r in RATERS]
    assert raters[-3:] == ["''plain", "O'Brien", "Ann"]  # a leading quote is doubled, one inside is left alone

    rep = rows_of(report.render(report.results(store, eval_id), "csv"))
    assert_no_formula(rep)
    assert [r[0] for r in rep[1:]] == ["'=1+1", "'-minus"]

    blind = zipfile.ZipFile(io.BytesIO(export_zip(store, eval_id, blind=True)))
    assert_no_formula(rows_of(blind.read("ratings.csv").decode()))

    # the rule, cell by cell: numbers as they are, texts guarded, and unguard the exact inverse
    assert (guard(-3.5), guard(0), guard(None), guard("-3.5"), guard("a=b")) == (-3.5, 0, "", "'-3.5", "a=b")
    for text in [*RATERS, FORMULA, "\tx", "\rx", "'", "''", "", "-"]:
        assert unguard(guard(text)) == text


def test_exported_ratings_import_back_exactly(tmp_path: Path, history_url: str | None) -> None:
    store, eval_id = made(tmp_path, url=history_url)
    a, b = [i.id for i in store.items(eval_id) if i.prompt_index == 0]
    store.add_ratings(eval_id, [(a, b, w, r) for w, r in zip("ab" * 4, RATERS)])
    before = [(r.item_a, r.item_b, r.winner, r.rater) for r in store.ratings(eval_id)]
    exported = tmp_path / "export.zip"
    exported.write_bytes(export_zip(store, eval_id))
    ratings_csv = tmp_path / "ratings.csv"
    ratings_csv.write_bytes(zipfile.ZipFile(exported).read("ratings.csv"))
    with store.history.transaction() as db:  # the ratings gone: only the file has them now
        db.execute("DELETE FROM eval_ratings WHERE evaluation_id = ?", (eval_id,))
    assert import_ratings(store, eval_id, ratings_csv.read_bytes()) == len(RATERS)
    assert [(r.item_a, r.item_b, r.winner, r.rater) for r in store.ratings(eval_id)] == before


def test_a_ratings_file_imported_twice_counts_once(tmp_path: Path, history_url: str | None) -> None:
    store, eval_id = made(tmp_path, ("A", "B"), history_url)
    a, b = [i.id for i in store.items(eval_id) if i.prompt_index == 0]
    sheet = tmp_path / "ratings.csv"
    sheet.write_text(f"item_a,item_b,winner,rater\n{a},{b},a,X\n{a},{b},tie,Y\n", encoding="utf-8")
    first = import_ratings_outcome(store, eval_id, sheet.read_bytes())
    assert (first.added, first.already) == (2, 0)
    again = import_ratings_outcome(store, eval_id, sheet.read_bytes())
    assert (again.added, again.already) == (0, 2)
    assert "imported 0 ratings" in again.text(eval_id) and "2 were already there" in again.text(eval_id)
    # the same pair in the other order, by X, is X's pair already; Z is new
    more = tmp_path / "more.csv"
    more.write_text(f"item_a,item_b,winner,rater\n{b},{a},b,X\n{b},{a},b,Z\n", encoding="utf-8")
    assert import_ratings_outcome(store, eval_id, more.read_bytes()) == type(first)(1, 1)
    assert sorted(r.rater for r in store.ratings(eval_id)) == ["X", "Y", "Z"]

    # one rater twice on one pair within a file: the file is refused, naming both lines, nothing imported
    twice = tmp_path / "twice.csv"
    twice.write_text(f"item_a,item_b,winner,rater\n{a},{b},a,W\n{b},{a},a,V\n{b},{a},b,W\n", encoding="utf-8")
    with pytest.raises(InvalidInput) as exc:
        import_ratings(store, eval_id, twice.read_bytes())
    assert "line 4: W rated the pair" in str(exc.value) and "on line 2" in str(exc.value)
    assert "nothing was imported" in str(exc.value) and len(store.ratings(eval_id)) == 3

    # the command says how many were already there
    env = {**cli_env(), "OMNI_STUDIO_DATA_DIR": str(tmp_path / "data"), "OMNI_STUDIO_DATABASE_URL": history_url or ""}
    p = run_cli([sys.executable, "-m", "services", "eval", "import", eval_id, str(sheet)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    assert f"imported 0 ratings into {eval_id}; 2 were already there" in p.stdout
    assert len(store.ratings(eval_id)) == 3
