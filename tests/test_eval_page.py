"""The Evaluations page with Streamlit's AppTest (the real app.py navigation) against the real offline engine:
define two image variants and a prompt set, run them, rate the pairs blind, reveal the results and see them
with their verdict and exports; a variant on a down target fails alone and can be continued; a bad definition
is named and nothing is created."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from services.eval.store import EvalStore
from tests.conftest import free_port
from tests.test_media_pages import _button, _ok, _open

PAGE = "pages/evaluations.py"


def _define(at, name: str, prompts: str, variants: list[dict[str, str]], button: str = "Create only") -> None:
    at.text_input(key="ev_name").input(name)
    at.text_area(key="ev_prompts").input(prompts)
    for i, v in enumerate(variants):
        if "target" in v:  # a registered server, picked by its key
            at.selectbox(key=f"ev_{i}_target").set_value(v["target"]).run()
        at.text_input(key=f"ev_{i}_label").input(v["label"])
        at.text_area(key=f"ev_{i}_settings").input(v.get("settings", ""))
    _button(at, button).click().run()
    _ok(at)


def run_to_end(at, data_dir: Path, label: str | None = "Run", timeout_s: float = 120.0) -> None:
    """Press Run (or Continue; None: a run started already, by Create and run): the run goes on the studio's
    runner, off the page (services/eval/runs.py); wait until no evaluation in the history at `data_dir` is being
    run, then draw the page again."""
    if label is not None:
        _button(at, label).click().run()
        _ok(at)
    reader = EvalStore(data_dir).history.reader()
    deadline = time.monotonic() + timeout_s
    while reader.execute("SELECT COUNT(*) FROM evaluations WHERE run_owner IS NOT NULL").fetchone()[0]:
        assert time.monotonic() < deadline, f"the evaluation run did not end in {timeout_s:.0f} s"
        time.sleep(0.1)
    at.run()
    _ok(at)


def _text(at) -> str:
    return " ".join(e.value for kind in (at.markdown, at.caption, at.success, at.error) for e in kind).replace("\\", "")


def test_define_run_review_blind_reveal_and_export(engine_url: str, monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    at = _open(monkeypatch, tmp_path, engine_url, PAGE)
    _define(at, "steps", "a red fox\na blue boat", [
        {"label": "four", "settings": 'size = "128x128"\nsteps = 4\nseed = 1'},
        {"label": "eight", "settings": 'size = "128x128"\nsteps = 8\nseed = 1'}], button="Create and run")
    assert not at.error, [e.value for e in at.error]
    store = EvalStore(tmp_path)
    (ev,) = store.list()
    assert ev["items"] == 4
    run_to_end(at, tmp_path, label=None)  # one press made it and started its run
    assert {i.status for i in store.items(ev["id"])} == {"succeeded"}
    assert "4 of 4 items made" in _text(at)
    # blind: the labels are nowhere on the page while rating
    at.text_input(key="ev_rater_input").input("ana")
    _button(at, "Start rating").click().run()
    text = _text(at)
    assert "Rating as **ana**" in text and "four" not in text and "eight" not in text
    _button(at, "1 is better").click().run()
    _button(at, "Tie").click().run()
    _ok(at)
    assert "every pair is rated" in _text(at)
    ratings = store.ratings(ev["id"])
    assert sorted(r.winner for r in ratings) == ["a", "tie"] and {r.rater for r in ratings} == {"ana"}
    assert not [d for d in at.dataframe]  # results hidden until revealed
    _button(at, "Reveal the results").click().run()
    _ok(at)
    table = at.dataframe[0].value
    assert list(table["variant"]) == ["four", "eight"] and list(table["ratings"]) == [2, 2]
    assert not [c for c in table.columns if "_" in c], list(table.columns)  # labels for people, not snake_case
    # short enough to fit beside the sidebar: every figure is one click away (transposed: a column per variant)
    assert "win rate" in table.columns and len(table.columns) <= 9, list(table.columns)
    every = at.dataframe[1].value
    assert list(every.columns) == ["four", "eight"] and {"95 % low", "latency p95 (s)", "latencies"} <= set(every.index)
    spec = json.loads(at.get("vega_lite_chart")[0].proto.spec)
    assert spec["height"] == 112, spec.get("height")  # two variants, a readable band each (not squashed)
    assert sorted(table["W–L–T"]) == ["0–1–1", "1–0–1"] and list(table["95 % interval"].str.count("–")) == [1, 1]
    assert "no significant difference" in _text(at)  # two ratings separate nothing
    labels = [b.label for b in at.get("download_button")]
    assert {"Export ZIP", "Blind sheet ZIP", "Report HTML", "Results JSON"} <= set(labels), labels
    # each variant's request as code, once revealed: the variant picked, its settings in the script
    assert at.selectbox(key=f"eval-code-{ev['id']}").options == ["four", "eight"]
    assert '"num_inference_steps": 4' in at.code[0].value and "variant four" in at.code[0].value
    at.selectbox(key=f"eval-code-{ev['id']}").select("eight").run()
    assert '"num_inference_steps": 8' in at.code[0].value and '"seed": 1' in at.code[0].value


def test_a_down_target_fails_alone_and_the_run_continues_later(engine_url: str, monkeypatch: pytest.MonkeyPatch,
                                                              tmp_path: Path) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    monkeypatch.setenv("OMNI_STUDIO_SERVERS", json.dumps([{"url": down}]))  # an admin registered it
    at = _open(monkeypatch, tmp_path, engine_url, PAGE)
    _define(at, "down", "a cat", [{"label": "here", "settings": 'size = "128x128"'},
                                  {"label": "gone", "target": f"server:{down}"}])
    run_to_end(at, tmp_path)
    store = EvalStore(tmp_path)
    items = {i.variant: i for i in store.items(store.list()[0]["id"])}
    assert items["here"].status == "succeeded" and items["gone"].status == "failed"
    assert any(down in e.value.replace("`", "").replace("\\", "") for e in at.error)
    assert "1 of 2 items made · 1 failed" in _text(at)
    assert any(b.label == "Continue (only what is missing)" for b in at.button)


@pytest.mark.parametrize("variants, prompts, message", [
    ([{"label": "x"}, {"label": "x"}], "a cat", "two variants are labelled 'x'"),
    ([{"label": "x", "settings": "colour = 3"}, {"label": "y"}], "a cat", "unknown setting(s) colour"),
    ([{"label": "x"}, {"label": "y"}], "", "the prompt set is empty"),
    ([{"label": "x", "settings": 'state_file = "/etc/passwd"'}, {"label": "y"}], "a cat",
     "state_file cannot be set here"),
    ([{"label": "x", "settings": 'url = "http://127.0.0.1:9/admin"'}, {"label": "y"}], "a cat", "url cannot be set here"),
])
def test_a_bad_definition_is_named_and_nothing_is_created(engine_url: str, monkeypatch: pytest.MonkeyPatch,
                                                          tmp_path: Path, variants, prompts, message) -> None:
    at = _open(monkeypatch, tmp_path, engine_url, PAGE)
    _define(at, "bad", prompts, variants)
    assert any(message in e.value.replace("\\", "") for e in at.error), [e.value for e in at.error]
    assert EvalStore(tmp_path).list() == []
    assert at.text_input(key="ev_name").value == "bad"


def test_a_csv_prompt_file_adds_to_the_typed_prompts(engine_url: str, monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    at = _open(monkeypatch, tmp_path, engine_url, PAGE)
    at.file_uploader(key="ev_upload").set_value(("prompts.csv", b"prompt,notes\na red fox,x\n\"a boat, blue\",y\n",
                                                  "text/csv")).run()
    _define(at, "file", "typed one", [{"label": "x"}, {"label": "y"}])
    assert not at.error, [e.value for e in at.error]
    (ev,) = EvalStore(tmp_path).list()
    assert EvalStore(tmp_path).get(ev["id"]).spec.prompts == ["typed one", "a red fox", "a boat, blue"]
    assert ev["items"] == 6


def test_voice_variants_pick_what_the_target_offers_and_a_voice_it_lacks_is_refused_at_create(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    at = _open(monkeypatch, tmp_path, engine_url, PAGE)
    at.segmented_control(key="ev_modality").set_value("voice").run()
    _ok(at)
    voices = at.selectbox(key="ev_0_voice").options
    assert "joe" in voices and "vivian" in voices and "zelda" not in voices  # the offline engine's, asked of it
    assert "English" in at.selectbox(key="ev_0_language").options
    placeholder = at.text_area(key="ev_0_settings").placeholder
    assert "voice =" not in placeholder  # the example names no voice: any target runs it
    _define(at, "typed", "Hello there.", [{"label": "x", "settings": 'voice = "zelda"'}, {"label": "y"}])
    assert any("variant 'x': voice 'zelda' is not one of its target's voices: pick one of" in e.value.replace("\\", "")
               and "joe" in e.value for e in at.error), [e.value for e in at.error]
    assert EvalStore(tmp_path).list() == []

    at.selectbox(key="ev_0_voice").set_value("joe")
    at.selectbox(key="ev_1_language").set_value("English")
    _define(at, "picked", "Hello there.", [{"label": "x", "settings": placeholder}, {"label": "y", "settings": placeholder}])
    assert not at.error, [e.value for e in at.error]
    store = EvalStore(tmp_path)
    (ev,) = store.list()
    spec = store.get(ev["id"]).spec
    assert spec.settings("x")["voice"] == "joe" and spec.settings("y")["language"] == "English"
    run_to_end(at, tmp_path)
    assert {i.status for i in store.items(ev["id"])} == {"succeeded"}  # the example runs on the target


def test_an_evaluation_is_edited_before_it_is_rated_and_deleted(engine_url: str, monkeypatch: pytest.MonkeyPatch,
                                                               tmp_path: Path) -> None:
    at = _open(monkeypatch, tmp_path, engine_url, PAGE)
    _define(at, "first", "a red fox", [{"label": "four", "settings": 'size = "64x64"\nsteps = 4'},
                                       {"label": "eight", "settings": 'size = "64x64"\nsteps = 8'}])
    store = EvalStore(tmp_path)
    (ev,) = store.list()
    run_to_end(at, tmp_path)
    old = [store.history.media.root / f"eval-{ev['id']}" / i.media for i in store.items(ev["id"])]
    _button(at, "Edit").click().run()
    _ok(at)
    assert at.text_input(key="ev_name").value == "first" and at.text_area(key="ev_prompts").value == "a red fox"
    assert at.text_area(key="ev_1_settings").value == 'size = "64x64"\nsteps = 8'
    at.text_input(key="ev_name").input("second")
    at.text_area(key="ev_prompts").input("a red fox\na blue boat")
    at.text_area(key="ev_1_settings").input('size = "64x64"\nsteps = 6')
    _button(at, "Save changes").click().run()
    _ok(at)
    assert not at.error, [e.value for e in at.error]
    edited = store.get(ev["id"])
    assert edited.name == "second" and edited.spec.prompts == ["a red fox", "a blue boat"]
    assert edited.spec.settings("eight")["steps"] == 6
    assert {i.status for i in store.items(ev["id"])} == {"pending"} and not any(p.exists() for p in old)
    assert "0 of 4 items made" in _text(at)  # back on the evaluation, to run again

    run_to_end(at, tmp_path)
    at.text_input(key="ev_rater_input").input("ana")
    _button(at, "Start rating").click().run()
    _button(at, "Tie").click().run()
    _ok(at)
    assert not [b for b in at.button if b.label == "Edit"] and "can no longer be edited" in _text(at)
    folder = store.history.media.root / f"eval-{ev['id']}"
    _button(at, "Delete this evaluation").click().run()
    _ok(at)
    assert store.list() == [] and not folder.exists()
    assert f"Deleted evaluation {ev['id']}" in _text(at)


def test_a_run_left_by_a_replica_that_died_shows_where_it_runs_and_is_carried_on(
        engine_url: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A team studio's other replica claimed the run and died before making anything (its claim is on the row,
    its lease running out): the page shows the run going on there, this replica's runner takes it over when the
    lease lapses and makes every item, and the page says where it was carried on."""
    from services.history.base import replica

    monkeypatch.setenv("OMNI_STUDIO_JOB_LEASE_S", "1")
    at = _open(monkeypatch, tmp_path, engine_url, PAGE)
    _define(at, "moved", "a red fox\na blue boat", [{"label": "four", "settings": 'size = "64x64"\nsteps = 4'},
                                                   {"label": "six", "settings": 'size = "64x64"\nsteps = 6'}])
    store = EvalStore(tmp_path)
    (ev,) = store.list()
    now = time.time()
    with store.history.transaction() as db:  # as replica-a's runner left it when its machine went
        db.execute("UPDATE evaluations SET run_owner = 'replica-a:4242:1', run_lease_until = ?, run_note = ? WHERE id = ?",
                   (now + 3, json.dumps({"claimed_at": now, "replica": "replica-a"}), ev["id"]))
    at.run()
    _ok(at)
    assert [p.text.replace("\\", "") for p in at.get("progress")] == ["Generating on replica-a · 0 of 4 made"]
    assert not any(b.label in ("Run", "Continue (only what is missing)") for b in at.button)
    assert any(b.label == "Stop (Continue picks up the rest)" for b in at.button)
    reader = store.history.reader()
    deadline = time.monotonic() + 90
    while reader.execute("SELECT run_owner FROM evaluations").fetchone()[0] is not None:
        assert time.monotonic() < deadline, "the run was not carried on"
        time.sleep(0.1)
    at.run()
    _ok(at)
    text = _text(at)
    assert "4 of 4 items made" in text
    assert f"It was carried on by {replica()} after replica-a stopped answering" in text, text
