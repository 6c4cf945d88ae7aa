"""Listen evaluations and voice intelligibility on the real offline engine (it serves both the speech and the
listen routes): recordings its voice makes, transcribed per variant, the report's corpus WER against the WER
computed here from the transcripts read back, the exports; a voice evaluation's intelligibility figure."""

from __future__ import annotations

import csv
import io
import json
import zipfile
from pathlib import Path

import httpx
import pytest

from protocol.errors import InvalidInput
from services.eval import report
from services.eval.export import export_zip
from services.eval.runner import run_items
from services.eval.spec import load_spec, parse_spec
from services.eval.store import EvalStore
from services.listen import normalise, word_error_rate
from services.settings import Settings

TEXTS = ["The weather is fine today.", "Please open the door for me.", "We will meet at the station."]


def speak(url: str, text: str) -> bytes:
    resp = httpx.post(f"{url}/v1/audio/speech", json={"input": text, "voice": "joe", "seed": 7}, timeout=60,
                      trust_env=False)
    assert resp.status_code == 200 and resp.content[:4] == b"RIFF"
    return resp.content


@pytest.fixture(scope="module")
def recordings(engine_url: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("recordings")
    for n, text in enumerate(TEXTS):
        (folder / f"r{n}.wav").write_bytes(speak(engine_url, text))
    with (folder / "items.csv").open("w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["audio", "reference"])
        w.writerows([f"r{n}.wav", text] for n, text in enumerate(TEXTS))
    return folder


def listen_spec(folder: Path, url: str, **over) -> dict:
    base = {"name": "file vs stream", "modality": "listen",
            "items": [{"audio": str(folder / f"r{n}.wav"), "reference": t} for n, t in enumerate(TEXTS)],
            "variants": [{"label": "file", "url": url}, {"label": "stream", "url": url, "route": "stream"}]}
    return base | over


def by_hand(pairs: list[tuple[str, str]]) -> tuple[int, int]:
    """Σ errors, Σ words over (reference, transcript) pairs, each utterance's WER × its words."""
    errors = words = 0
    for ref, hyp in pairs:
        n = len(normalise(ref).split())
        errors += round(word_error_rate(ref, hyp) * n)
        words += n
    return errors, words


def test_listen_evaluation_reports_the_corpus_wer_of_the_transcripts(engine_url: str, recordings: Path,
                                                                      tmp_path: Path) -> None:
    store = EvalStore(tmp_path / "data")
    ev = store.create(parse_spec(listen_spec(recordings, engine_url)))
    assert ev.spec.prompts == TEXTS and len(store.items(ev.id)) == 6
    # the recordings are kept in the store: the originals may go
    assert store.recording(ev, 0) == (recordings / "r0.wav").read_bytes()
    out = run_items(store, ev.id, base=Settings(data_dir=tmp_path / "data", server_url=engine_url))
    assert out.generated == 6 and not out.failed, out.failed
    res = report.results(store, ev.id)
    for v in res["variants"]:
        mine = [i for i in store.items(ev.id) if i.variant == v["label"]]
        transcripts = [store.media(i).decode("utf-8").strip() for i in mine]
        assert all(transcripts)
        errors, words = by_hand([(i.prompt, t) for i, t in zip(mine, transcripts)])
        assert (v["word_errors"], v["ref_words"], v["utterances"]) == (errors, words, 3)
        assert v["wer"] == pytest.approx(errors / words)
        low, high = v["wer_ci95"]
        assert low <= v["wer"] <= high
        assert v["wins"] == 0 and v["ratings"] == 0  # nothing is rated
    assert res["method"]["wer"].startswith("corpus WER = total errors / total reference words")
    assert len(res["separation"]) == 1 and "WER 95 % intervals" in report.verdicts(res)[0]

    rows = list(csv.DictReader(io.StringIO(report.render(res, "csv"))))
    assert [r["label"] for r in rows] == ["file", "stream"]
    assert float(rows[0]["wer"]) == pytest.approx(res["variants"][0]["wer"])
    assert json.loads(report.render(res, "json"))["variants"][1]["utterances"] == 3
    md = report.render(res, "md")
    assert "n=3 utterances" in md and "resamples" in md
    z = zipfile.ZipFile(io.BytesIO(export_zip(store, ev.id)))
    names = set(z.namelist())
    assert sum(n.startswith("media/") and n.endswith(".txt") for n in names) == 6
    assert {f"audio/000{n}.wav" for n in range(3)} <= names
    items = list(csv.DictReader(io.StringIO(z.read("items.csv").decode())))
    assert {r["words"] for r in items} == {str(len(normalise(t).split())) for t in TEXTS}
    html = z.read("report.html").decode()
    assert "no blind rating" in html and "<script" not in html


def test_listen_specs_refused_naming_what_to_fix(recordings: Path, tmp_path: Path) -> None:
    url = "http://127.0.0.1:9"
    good = listen_spec(recordings, url)
    (tmp_path / "silence.wav").write_bytes(b"RIFF" + b"\0" * 40)
    for over, needle in [
        ({"items": []}, "has no items"),
        ({"prompts": ["x"]}, "names recordings, not prompts"),
        ({"items": [{"audio": str(recordings / "r0.wav"), "reference": "  ,. "}]}, "item 1 (r0.wav): the reference"),
        ({"items": [{"audio": str(tmp_path / "nope.wav"), "reference": "hi"}]}, "item 1's audio"),
        ({"items": [{"audio": str(tmp_path / "silence.wav"), "reference": "hi"}]}, "item 1: "),
        ({"variants": [{"label": "a", "url": url, "language": "fr"}, {"label": "b"}]}, "English only"),
        ({"variants": [{"label": "a", "voice": "joe"}, {"label": "b"}]}, "unknown setting(s) voice for listen"),
        ({"intelligibility": "offline"}, "intelligibility is a voice evaluation's setting"),
    ]:
        with pytest.raises(InvalidInput, match=None) as exc:
            parse_spec(good | over)
        assert needle in str(exc.value), (over, str(exc.value))
    # items_file: a CSV of audio, reference beside the recordings, paths relative to it
    (tmp_path / "spec.toml").write_text(
        f'name = "n"\nmodality = "listen"\nitems_file = "{recordings / "items.csv"}"\n'
        f'[[variants]]\nlabel = "a"\nurl = "{url}"\n[[variants]]\nlabel = "b"\n', encoding="utf-8")
    spec = load_spec(tmp_path / "spec.toml")
    assert spec.prompts == TEXTS and [Path(p).name for p in spec.audio] == ["r0.wav", "r1.wav", "r2.wav"]


def test_voice_evaluation_measures_intelligibility(engine_url: str, tmp_path: Path) -> None:
    spec = parse_spec({"name": "intel", "modality": "voice", "prompts": TEXTS[:2], "intelligibility": engine_url,
                       "variants": [{"label": "clause", "url": engine_url},
                                    {"label": "down", "url": engine_url, "split": "sentence"}]})
    assert spec.intelligibility == {"backend": "server", "url": engine_url}
    assert parse_spec({"name": "n", "modality": "voice", "prompts": ["x"],
                       "variants": [{"label": "a"}, {"label": "b"}]}).intelligibility == {"backend": "offline"}
    store = EvalStore(tmp_path)
    ev = store.create(spec)
    assert run_items(store, ev.id, base=Settings(data_dir=tmp_path, server_url=engine_url)).generated == 4
    res = report.results(store, ev.id)
    assert res["intelligibility_target"] == f"the listen server at {engine_url}"
    for v in res["variants"]:
        mine = [i for i in store.items(ev.id) if i.variant == v["label"]]
        assert all(i.figures["intel_transcript"] for i in mine)
        errors, words = by_hand([(i.prompt, i.figures["intel_transcript"]) for i in mine])
        assert (v["intelligibility_n"], v["intelligibility_words"], v["intelligibility_errors"]) == (2, words, errors)
        assert v["intelligibility_wer"] == pytest.approx(errors / words)
    assert "intelligibility_wer" in report.render(res, "csv").splitlines()[0]
    assert any(line.startswith("- Heard by the listen server") for line in report.render(res, "md").splitlines())
    # a listen target that is down leaves the figure out, with why; the takes stand
    off = store.create(parse_spec({"name": "off", "modality": "voice", "prompts": ["Hello there."],
                                   "intelligibility": "http://127.0.0.1:9",
                                   "variants": [{"label": "a", "url": engine_url}, {"label": "b", "url": engine_url}]}))
    assert run_items(store, off.id, base=Settings(data_dir=tmp_path, server_url=engine_url)).generated == 2
    assert all("127.0.0.1:9" in i.figures["intel_error"] for i in store.items(off.id))
    assert report.results(store, off.id)["variants"][0]["intelligibility_n"] == 0


# ---- the command line ----------------------------------------------------------------------------------------
def test_cli_runs_reports_and_exports_a_listen_spec(engine_url: str, recordings: Path, tmp_path: Path) -> None:
    from tests.test_eval_cli import ev

    data = tmp_path / "data"
    spec = tmp_path / "listen.toml"
    spec.write_text("\n".join([
        'name = "twice by url"', 'modality = "listen"', f'items_file = "{recordings / "items.csv"}"',
        "[[variants]]", 'label = "A"', f'url = "{engine_url}"',
        "[[variants]]", 'label = "B"', f'url = "{engine_url}"', 'model = "mistralai/Voxtral-Mini-4B-Realtime-2602"',
    ]) + "\n", encoding="utf-8")
    p = ev(data, "run", str(spec), "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert (out["items"], out["generated"], out["failed"]) == (6, 6, 0)
    rep = ev(data, "report", out["id"], "--format", "csv")
    assert rep.returncode == 0, rep.stderr
    rows = {r["label"]: r for r in csv.DictReader(io.StringIO(rep.stdout))}
    zipped = tmp_path / "x.zip"
    assert ev(data, "export", out["id"], "--out", str(zipped)).returncode == 0
    z = zipfile.ZipFile(zipped)
    items = list(csv.DictReader(io.StringIO(z.read("items.csv").decode())))
    for label in ("A", "B"):
        mine = [r for r in items if r["variant"] == label]
        pairs = [(r["prompt"], z.read(r["media"]).decode().strip()) for r in mine]
        errors, words = by_hand(pairs)
        assert (int(rows[label]["word_errors"]), int(rows[label]["ref_words"]), rows[label]["utterances"]) == (
            errors, words, "3")
        assert float(rows[label]["wer"]) == pytest.approx(errors / words)
        assert float(rows[label]["wer_ci95_low"]) <= float(rows[label]["wer"]) <= float(rows[label]["wer_ci95_high"])
    # the same recognizer twice: the same transcripts, the same WER
    assert rows["A"]["wer"] == rows["B"]["wer"]
    md = ev(data, "report", out["id"], "--format", "md").stdout
    assert "A: WER" in md and "2000 resamples" in md
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "n"\nmodality = "listen"\nprompts = ["x"]\n[[variants]]\nlabel = "a"\n'
                   '[[variants]]\nlabel = "b"\n', encoding="utf-8")
    p = ev(data, "run", str(bad))
    assert p.returncode == 1 and "names recordings, not prompts" in p.stderr


def test_speak_prints_the_intelligibility_of_the_take(engine_url: str, tmp_path: Path) -> None:
    from tests.test_speech_cli import speak as speak_cli

    text = TEXTS[0]
    p = speak_cli("--url", engine_url, "--text", text, "--out", str(tmp_path / "a.wav"), "--json",
                  "--intelligibility", engine_url)
    assert p.returncode == 0, p.stderr
    heard = json.loads(p.stdout)["intelligibility"]
    assert heard["heard_by"] == f"the listen server at {engine_url}" and heard["transcript"]
    words = len(normalise(text).split())
    assert heard["words"] == words
    assert heard["wer"] == pytest.approx(round(word_error_rate(text, heard["transcript"]), 4))
    assert heard["errors"] == round(word_error_rate(text, heard["transcript"]) * words)
    p = speak_cli("--url", engine_url, "--text", text, "--out", str(tmp_path / "b.wav"), "--intelligibility",
                  "http://127.0.0.1:9")
    assert p.returncode == 0 and "intelligibility: not measured" in p.stderr and "127.0.0.1:9" in p.stderr


# ---- the Evaluations page ------------------------------------------------------------------------------------
def test_page_shows_a_listen_evaluation_without_rating(engine_url: str, recordings: Path,
                                                      monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from tests.test_eval_page import run_to_end
    from tests.test_media_pages import _button, _ok, _open

    at = _open(monkeypatch, tmp_path, engine_url, "pages/evaluations.py")
    at.segmented_control(key="ev_modality").set_value("listen").run()
    _ok(at)
    assert any("References" in t.label for t in at.text_area)
    at.text_input(key="ev_name").input("no uploads")
    at.text_area(key="ev_prompts").input("hello there")
    _button(at, "Create only").click().run()
    assert any("give the recordings to transcribe" in e.value for e in at.error), [e.value for e in at.error]
    store = EvalStore(tmp_path)
    assert store.list() == []
    ev = store.create(parse_spec(listen_spec(recordings, engine_url,
                                             variants=[{"label": "one", "url": engine_url},
                                                       {"label": "two", "url": engine_url}])))
    at = _open(monkeypatch, tmp_path, engine_url, "pages/evaluations.py")
    at.selectbox(key="ev_pick_2").set_value(ev.id).run()
    _ok(at)
    run_to_end(at, tmp_path)
    text = " ".join(e.value for kind in (at.markdown, at.caption, at.info) for e in kind)
    assert "Blind rating is not needed here" in text and "Reveal the results" not in [b.label for b in at.button]
    assert not [b for b in at.button if b.label in ("1 is better", "Tie")]
    table = at.dataframe[0].value
    res = report.results(store, ev.id)
    assert list(table["variant"]) == ["one", "two"]
    assert list(table["WER (corpus)"]) == pytest.approx([v["wer"] for v in res["variants"]])
    assert list(table["utterances"]) == [3, 3]
    assert "one: WER" in text and "2000 resamples" in text


def test_a_voice_takes_listen_target_and_its_line(engine_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The Voice page's choice (services/eval/listening.take_listener): the backend's own listen route, else the
    offline engine's recognizer labelled as the stand-in it is; and the one line a take's figure is shown as."""
    import types

    import offline.launch
    from services.eval.listening import OFFLINE_LABEL, intelligibility_line, take_listener
    from services.listen import OmniListen

    def backend(name: str, listen: object) -> types.SimpleNamespace:
        return types.SimpleNamespace(name=name, client=lambda part: {"listen": listen}[part])

    own = OmniListen(engine_url)
    assert take_listener(backend("server", own)) == (own, f"the listen route of {engine_url}")
    assert take_listener(backend("offline", own)) == (own, OFFLINE_LABEL)
    monkeypatch.setattr(offline.launch, "shared_engine", lambda: types.SimpleNamespace(url=engine_url))
    for listen in (types.SimpleNamespace(endpoint=None, target="SageMaker (no listen endpoint)"),):
        listener, label = take_listener(backend("sagemaker", listen))
        assert isinstance(listener, OmniListen) and listener.target == engine_url and label == OFFLINE_LABEL
    heard = {"wer": 0.125, "errors": 1, "words": 8, "transcript": "open the door", "heard_by": "X"}
    assert intelligibility_line(heard) == ("Intelligibility: WER 12.5 % (1 error / 8 words) — heard: "
                                           "'open the door' (by X)")
    assert intelligibility_line({"error": "cannot reach it", "heard_by": "X"}) == (
        "Intelligibility: not measured — the recognizer failed: cannot reach it (by X)")
