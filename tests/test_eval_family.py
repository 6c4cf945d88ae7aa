"""Evaluations through the family registry (services/eval/family.py): the families evaluated are those whose
module registers a part; a family that makes audio from a text prompt with a seed (sound) is evaluated with its
own part and nothing else — its items made on the real offline engine's /v1/audio/generate, paired blind, rated,
reported and exported; results already in the history (voice takes, images, sounds) as a variant's outputs; the
verdict that says why intervals that overlap give no number; the short results table."""

from __future__ import annotations

import dataclasses
import io
import time
import typing
import wave
import zipfile
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest

from protocol import limits
from protocol.errors import InvalidInput
from protocol.limits import Range
from services import families
from services.eval import pairing, rated, report
from services.eval.export import export_zip
from services.eval.sound import SoundEval
from services.eval.registry import evaluation
from services.eval.runner import run_items
from services.eval.spec import Modality, parse_spec
from services.eval.store import EvalStore
from services.eval.table import people_rows
from services.settings import Settings


@pytest.fixture
def sound_evaluated() -> None:
    """Sound's part is registered by its family module (services/families/sound.py, services/eval/sound.py)."""
    assert isinstance(families.code("sound").evaluation, SoundEval)


def test_the_evaluated_families_are_those_whose_module_registers_a_part():
    assert typing.get_args(Modality) == families.having("evaluation") == ("voice", "image", "video", "listen", "sound")
    for name in families.having("evaluation"):
        part = evaluation(name)
        assert part.name == name and part.variant.EXAMPLE and part.makes.count("/") == 1
    with pytest.raises(InvalidInput, match=r"modality must be voice, image, video, listen or sound, not 'omni' \(omni "
                                           r"is not evaluated yet\)"):
        parse_spec({"name": "x", "modality": "omni", "prompts": ["hi"], "variants": [{"label": "a"}, {"label": "b"}]})


def _wav_shape(data: bytes) -> tuple[int, int]:
    with wave.open(io.BytesIO(data)) as w:
        return w.getframerate(), w.getnchannels()


def test_a_sound_part_alone_is_evaluated_blind_on_the_offline_engine(sound_evaluated, engine_url: str,
                                                                     tmp_path: Path) -> None:
    with pytest.raises(InvalidInput, match=r"unknown setting\(s\) size for sound; the settings are .*seconds, steps"):
        parse_spec({"name": "x", "modality": "sound", "prompts": ["rain"],
                    "variants": [{"label": "a", "size": "1x1"}, {"label": "b"}]})
    with pytest.raises(InvalidInput, match="variant 1 \\('a'\\): the length is 99 s"):
        parse_spec({"name": "x", "modality": "sound", "prompts": ["rain"],
                    "variants": [{"label": "a", "seconds": 99}, {"label": "b"}]})
    base = Settings(data_dir=tmp_path / "data", backend="server", server_url=engine_url)
    store = EvalStore(base.data_dir)
    spec = parse_spec({"name": "seeds", "modality": "sound", "prompts": ["rain on a tin roof", "a door creaks"],
                       "variants": [{"label": "one", "seconds": 1, "seed": 1}, {"label": "two", "seconds": 1, "seed": 2}]})
    ev = store.create(spec)
    outcome = run_items(store, ev.id, base=base)
    assert (outcome.generated, outcome.failed) == (4, [])
    items = store.items(ev.id)
    assert all(_wav_shape(store.media(i)) == (44100, 2) for i in items)  # the engine's 44.1 kHz stereo, as kept
    for rater in ("ana", "ben"):
        while (pair := pairing.next_pair(store, ev.id, rater)) is not None:
            pairing.record_rating(store, ev.id, pair.item_a, pair.item_b, "a", rater)
    res = report.results(store, ev.id)
    assert res["ratings"] == 4 and [v["ratings"] for v in res["variants"]] == [4, 4]
    assert report.columns(res)[:8] == ("label", "items", "failed", "ratings", "wins", "losses", "ties", "win_rate")
    assert all("no significant difference" in line or "significant" in line for line in report.verdicts(res))
    names = zipfile.ZipFile(io.BytesIO(export_zip(store, ev.id))).namelist()
    assert sum(n.endswith(".wav") for n in names) == 4
    page = zipfile.ZipFile(io.BytesIO(export_zip(store, ev.id))).read("report.html").decode()
    assert page.count("<audio controls") == 4


def test_kept_sounds_are_a_variants_outputs_and_their_prompts_join(sound_evaluated, engine_url: str,
                                                                     tmp_path: Path) -> None:
    from services.backend import server_backend
    from services.sound import SoundRequest, record_sound

    base = Settings(data_dir=tmp_path / "data", backend="server", server_url=engine_url)
    store = EvalStore(base.data_dir)
    backend = server_backend(engine_url, base)
    try:
        kept = record_sound(backend.client("sound"), store.history, SoundRequest("a kettle whistles", seconds=1, seed=4))
    finally:
        backend.close()
    assert [c.id for c in evaluation("sound").kept_choices(store.history)] == [kept.id]
    spec = parse_spec({"name": "kept", "modality": "sound", "prompts": [],
                       "variants": [{"label": "kept", "kept": [kept.id]}, {"label": "new", "seconds": 1, "seed": 9}]})
    ev = store.create(spec)
    assert ev.spec.prompts == ["a kettle whistles"]  # the kept one's prompt joined
    by_variant = {i.variant: i for i in store.items(ev.id)}
    assert by_variant["kept"].status == "succeeded" and by_variant["new"].status == "pending"
    assert store.media(by_variant["kept"]) == kept.read(kept.outputs[0]) and by_variant["kept"].figures["kept"] == kept.id
    assert run_items(store, ev.id, base=base).generated == 1  # nothing made for the kept variant
    pair = pairing.next_pair(store, ev.id, "ana")
    assert pair is not None and pair.prompt == "a kettle whistles"


# ---- results already in the history: voice takes and images --------------------------------------------------
def _speak(url: str, text: str) -> bytes:
    resp = httpx.post(f"{url}/v1/audio/speech", json={"input": text, "voice": "joe"}, timeout=60, trust_env=False)
    assert resp.status_code == 200 and resp.content[:4] == b"RIFF"
    return resp.content


def test_voice_takes_from_the_history_are_rated_against_a_made_variant(engine_url: str, tmp_path: Path) -> None:
    base = Settings(data_dir=tmp_path / "data", backend="server", server_url=engine_url)
    store = EvalStore(base.data_dir)
    takes = [store.history.takes.record(text, _speak(engine_url, text), target=engine_url, voice_label="voice joe",
                                        figures={"ttfa_ms": 120.0, "rtf": 0.2})
             for text in ("Hello there.", "Good morning.")]
    choices = evaluation("voice").kept_choices(store.history)
    assert {c.id for c in choices} == {t.id for t in takes} and "voice joe" in choices[0].label
    spec = parse_spec({"name": "kept takes", "modality": "voice", "prompts": ["Hello there."], "intelligibility": "none",
                       "variants": [{"label": "kept", "kept": [t.id for t in takes]}, {"label": "made"}]})
    ev = store.create(spec)
    assert ev.spec.prompts == ["Hello there.", "Good morning."] and len(store.items(ev.id)) == 4
    run_items(store, ev.id, base=base)
    assert {i.status for i in store.items(ev.id)} == {"succeeded"}
    rated_pairs = 0
    while (pair := pairing.next_pair(store, ev.id, "ana")) is not None:
        pairing.record_rating(store, ev.id, pair.item_a, pair.item_b, "tie", "ana")
        rated_pairs += 1
    res = report.results(store, ev.id)
    assert rated_pairs == 2 and res["variants"][0]["ttfa_p50_ms"] == 120.0
    assert "the win rates are equal (0.500 after 2 and 2 ratings)" in report.verdicts(res)[0]


def test_kept_results_are_checked_before_anything_is_made(engine_url: str, tmp_path: Path) -> None:
    from services.images import ImageRequest
    from services.backend import server_backend

    base = Settings(data_dir=tmp_path / "data", backend="server", server_url=engine_url)
    store = EvalStore(base.data_dir)
    backend = server_backend(engine_url, base)
    try:
        png = backend.client("image").generate(ImageRequest("a red fox", size="64x64", steps=2)).images[0]
    finally:
        backend.close()
    images = []
    for seed in (1, 2):
        job = store.history.jobs.create("image", "a red fox", {"seed": seed}, target=engine_url)
        images.append(store.history.jobs.succeed(job.id, {"image.png": png}, timings={"wall_s": 0.5}))
    both = parse_spec({"name": "kept", "modality": "image", "prompts": [],
                       "variants": [{"label": "a", "kept": [images[0].id]}, {"label": "b", "kept": [images[1].id]}]})
    ev = store.create(both)  # two variants of kept images of one prompt: compared, nothing to run
    assert {i.status for i in store.items(ev.id)} == {"succeeded"} and store.items(ev.id)[0].figures["latency_s"] == 0.5
    assert pairing.next_pair(store, ev.id, "ana") is not None
    refusals = [
        ({"variants": [{"label": "a", "kept": [images[0].id, images[1].id]}, {"label": "b"}]},
         "variant 'a' keeps more results for the prompt 'a red fox' than the evaluation's 1 repeat"),
        ({"variants": [{"label": "a", "kept": ["take-nope"]}, {"label": "b"}]}, "variant 'a': there is no job 'take-nope'"),
    ]
    for over, needle in refusals:
        with pytest.raises(InvalidInput, match=needle):
            store.create(parse_spec({"name": "x", "modality": "image", "prompts": ["a red fox"]} | over))
    for over, needle in [
        ({"variants": [{"label": "a", "kept": ["x"], "steps": 4}, {"label": "b"}]}, "it has no target or settings"),
        ({"variants": [{"label": "a", "kept": ["x", "x"]}, {"label": "b"}]}, "kept names one result twice"),
        ({"variants": [{"label": "a", "kept": "x"}, {"label": "b"}]}, "kept is a list of the ids of images"),
    ]:
        with pytest.raises(InvalidInput, match=needle):
            parse_spec({"name": "x", "modality": "image", "prompts": ["a red fox"]} | over)
    assert len(store.list()) == 1
    assert evaluation("listen").keeps is None  # its variants transcribe: nothing of the history stands in


# ---- what the results say, and the table that fits ------------------------------------------------------------
def _res(a: dict, b: dict, **over) -> dict:
    rows = [{"label": "A", "ratings": 0, "wins": 0, "losses": 0, "ties": 0, "win_rate": None, "ci95": None} | a,
            {"label": "B", "ratings": 0, "wins": 0, "losses": 0, "ties": 0, "win_rate": None, "ci95": None} | b]
    return {"variants": rows, "separation": [{"a": "A", "b": "B", "overlap": True, "more_ratings": None,
                                              "n_each": None}]} | over


def test_a_verdict_says_which_reason_leaves_no_number():
    assert rated.verdicts(_res({}, {}))[0] == ("A vs B: no significant difference — neither has been rated yet: rate "
                                              "some pairs.")
    assert "B has not been rated yet" in rated.verdicts(_res({"ratings": 2, "win_rate": 1.0}, {}))[0]
    equal = rated.verdicts(_res({"ratings": 3, "win_rate": 0.5}, {"ratings": 5, "win_rate": 0.5}))[0]
    assert "the win rates are equal (0.500 after 3 and 5 ratings)" in equal and "rated yet" not in equal
    close = rated.verdicts(_res({"ratings": 3, "win_rate": 0.5}, {"ratings": 3, "win_rate": 0.5001}))[0]
    assert "so close that more than 100,000 ratings each" in close


def test_the_short_table_keeps_a_few_columns_and_every_figure_stays_in_the_report():
    voice = {"label": "A", "items": 4, "failed": 0, "ratings": 4, "wins": 3, "losses": 1, "ties": 0, "win_rate": 0.75,
             "ci95": [0.3, 0.95], "latency_p50_s": 1.234, "latency_p95_s": 2.5, "latency_n": 4, "ttfa_p50_ms": 310.4,
             "ttfa_p95_ms": 400.0, "cost_per_item_usd": None, "intelligibility_wer": 0.05,
             "intelligibility_ci95": [0.0, 0.1], "intelligibility_n": 4, "intelligibility_words": 40}
    res = {"modality": "voice", "intelligibility_target": "the offline engine", "variants": [voice, voice | {"label": "B"}]}
    rows = people_rows(res)
    assert list(rows[0]) == ["variant", "items", "ratings", "W–L–T", "win rate", "95 % interval", "first audio p50 (ms)",
                             "intelligibility WER", "latency p50 / p95 (s)"]  # no cost known, nothing failed
    assert rows[0]["W–L–T"] == "3–1–0" and rows[0]["95 % interval"] == "0.300–0.950"
    assert rows[0]["intelligibility WER"] == "5.0% [0.0%–10.0%]" and rows[0]["latency p50 / p95 (s)"] == "1.23 / 2.50"
    failed = people_rows(res | {"variants": [voice | {"failed": 2, "cost_per_item_usd": 0.0012}, voice]})
    assert failed[0]["failed"] == 2 and failed[1]["failed"] == 0 and failed[1]["cost / item"] is None


# ---- the page: a variant of voice takes picked from the history, created and run in one press ----------------
def test_the_page_takes_voice_takes_from_the_history_and_creates_and_runs(engine_url: str,
                                                                         monkeypatch: pytest.MonkeyPatch,
                                                                         tmp_path: Path) -> None:
    from tests.test_eval_page import run_to_end
    from tests.test_media_pages import _button, _ok, _open
    from ui.eval_define import KEPT

    take = EvalStore(tmp_path).history.takes.record("Hello there.", _speak(engine_url, "Hello there."),
                                                    target=engine_url, voice_label="voice joe")
    at = _open(monkeypatch, tmp_path, engine_url, "pages/evaluations.py")
    at.segmented_control(key="ev_modality").set_value("voice").run()
    at.text_input(key="ev_name").input("kept against made")
    at.segmented_control(key="ev_0_source").set_value(KEPT).run()
    _ok(at)
    picker = at.multiselect(key="ev_0_kept")
    assert picker.options == ["Hello there. · voice joe"] and not at.text_area(key="ev_prompts").value
    picker.set_value([take.id]).run()
    assert not [t for t in at.text_area if t.key == "ev_0_settings"]  # a kept variant has no target or settings
    _button(at, "Create and run").click().run()
    _ok(at)
    assert not at.error, [e.value for e in at.error]
    store = EvalStore(tmp_path)
    (ev,) = store.list()
    assert store.get(ev["id"]).spec.prompts == ["Hello there."]
    run_to_end(at, tmp_path, label=None)
    assert {i.status for i in store.items(ev["id"])} == {"succeeded"} and "2 of 2 items made" in " ".join(
        c.value for c in at.caption)
    at.text_input(key="ev_rater_input").input("ana")
    _button(at, "Start rating").click().run()
    assert len(at.get("audio")) == 2  # the pair drawn by what voice makes: two players
