"""Evaluations (services/eval): the SPEC's refusals, a two-variant voice run on the real offline engine,
interrupted and resumed, a target that is down, blind pairs, ratings imported all-or-nothing, the export."""

from __future__ import annotations

import io
import zipfile
from pathlib import Path

import pytest

from protocol.errors import InvalidInput
from services.eval import pairing, report
from services.eval.export import export_zip, import_ratings
from services.eval.runner import run_items
from services.eval.spec import load_spec, parse_spec
from services.eval.store import EvalStore
from services.settings import Settings
from tests.conftest import free_port

PROMPTS = ["Hello there.", "Good morning, everyone.", "The weather is fine today."]


def spec_dict(**over):
    base = {"name": "split test", "modality": "voice", "prompts": list(PROMPTS), "repeats": 1,
            "variants": [{"label": "clause", "split": "clause"}, {"label": "sentence", "split": "sentence"}]}
    return base | over


# ---- the SPEC ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("over, needle", [
    ({"colour": "blue"}, "unknown key(s) in the SPEC: colour"),
    ({"variants": [{"label": "a", "speed": 2}, {"label": "b"}]}, "unknown setting(s) speed for voice"),
    ({"modality": "image", "variants": [{"label": "a", "voice": "x"}, {"label": "b"}]},
     "unknown setting(s) voice for image"),
    ({"variants": [{"label": "a"}]}, "at least 2 variants"),
    ({"variants": [{"label": "a"}, {"label": "a"}]}, "two variants are labelled 'a'"),
    ({"variants": [{"label": "a"}, {"split": "none"}]}, "variant 2 has no label"),
    ({"prompts": []}, "the prompt set is empty"),
    ({"prompts": ["  ", ""]}, "the prompt set is empty"),
    ({"modality": "audio"}, "modality must be voice, image, video, listen or sound"),
    ({"repeats": 0}, "repeats must be a whole number"),
    ({"variants": [{"label": "a", "split": "word"}, {"label": "b"}]}, "variant 1 ('a'): split"),
    ({"prompts": [f"p{i}" for i in range(501)]}, "1002 items"),
    ({"modality": "image", "variants": [{"label": "a", "size": "huge"}, {"label": "b"}]}, "variant 1 ('a'): "),
    ({"modality": "video", "variants": [{"label": "a"}, {"label": "b", "steps": 0}]}, "variant 2 ('b'): "),
    ({"variants": [{"label": "a", "first_chunk_frames": 100000}, {"label": "b"}]}, "variant 1 ('a'): "),
])
def test_bad_specs_are_refused_naming_what_to_fix(over, needle):
    with pytest.raises(InvalidInput) as exc:
        parse_spec(spec_dict(**over))
    assert needle in str(exc.value)


def test_more_than_1000_items_need_yes_and_dashed_names_and_prompts_file(tmp_path):
    assert parse_spec(spec_dict(prompts=[f"p{i}" for i in range(501)]), yes=True).item_count == 1002
    (tmp_path / "prompts.txt").write_text("one\n\ntwo\n", encoding="utf-8")
    (tmp_path / "spec.toml").write_text(
        'name = "n"\nmodality = "voice"\nprompts_file = "prompts.txt"\nrepeats = 2\n'
        '[[variants]]\nlabel = "a"\nfirst-chunk-frames = 10\n[[variants]]\nlabel = "b"\nurl = "http://127.0.0.1:9"\n',
        encoding="utf-8")
    spec = load_spec(tmp_path / "spec.toml")
    assert spec.prompts == ["one", "two"] and spec.item_count == 8
    assert spec.settings("a")["first_chunk_frames"] == 10 and spec.settings("b")["url"] == "http://127.0.0.1:9"
    (tmp_path / "bad.toml").write_text("name = \n", encoding="utf-8")
    with pytest.raises(InvalidInput, match="not valid TOML"):
        load_spec(tmp_path / "bad.toml")


@pytest.mark.parametrize("modality, top, variant, needle", [
    ("voice", "seed = inf", "", "seed must be a whole number from 0 to 4294967295"),
    ("voice", "seed = nan", "", "seed must be a whole number from 0 to 4294967295"),
    ("voice", "seed = -inf", "", "seed must be a whole number from 0 to 4294967295"),
    ("voice", "seed = 1.5", "", "seed must be a whole number from 0 to 4294967295"),
    ("voice", "", "price_per_hour = inf", "variant 1 ('a'): price_per_hour: the price per hour (USD) must be a number "
                                          "from 0.0001 to 1000"),
    ("voice", "", "price_per_hour = nan", "variant 1 ('a'): price_per_hour:"),
    ("voice", "", "price_per_hour = -3.0", "variant 1 ('a'): price_per_hour:"),
    ("voice", "", "first_chunk_frames = nan", "variant 1 ('a'): first_chunk_frames must be a whole number from 1 "
                                              "to 64"),
    ("image", "", "seed = inf", "variant 1 ('a'): seed must be a whole number from 0 to 4294967295"),
    ("image", "", "steps = inf", "variant 1 ('a'): steps must be a whole number from 1 to 200"),
    ("video", "", "fps = nan", "variant 1 ('a'): fps must be a whole number from 1 to 60"),
    ("video", "", "guidance = -inf", "variant 1 ('a'): guidance must be a number from 0 to 20"),
])
def test_inf_and_nan_in_a_spec_are_refused_naming_the_key_and_its_range(modality, top, variant, needle, tmp_path):
    (tmp_path / "spec.toml").write_text(
        f'name = "n"\nmodality = "{modality}"\nprompts = ["p"]\n{top}\n'
        f'[[variants]]\nlabel = "a"\n{variant}\n[[variants]]\nlabel = "b"\n', encoding="utf-8")
    with pytest.raises(InvalidInput) as exc:
        load_spec(tmp_path / "spec.toml")
    assert needle in str(exc.value)


# ---- a run on the real engine ------------------------------------------------------------------------------
def test_voice_run_interrupted_resumed_rated_and_exported(engine_url: str, tmp_path: Path) -> None:
    base = Settings(data_dir=tmp_path / "data", backend="server", server_url=engine_url)
    store = EvalStore(base.data_dir)
    ev = store.create(parse_spec(spec_dict()))
    assert len(store.items(ev.id, status="pending")) == 6

    seen = []

    def stop_after_two(p):
        seen.append(p["item"])
        if len(seen) == 2:
            raise KeyboardInterrupt  # the run stops here, as a restart would stop it

    with pytest.raises(KeyboardInterrupt):
        run_items(store, ev.id, base=base, on_progress=stop_after_two)
    done = store.items(ev.id, status="succeeded")
    assert sorted(i.id for i in done) == sorted(seen)
    kept = {i.id: store.media(i) for i in done}

    resumed = run_items(store, ev.id, base=base)
    assert resumed.generated == 4 and not resumed.failed  # only what was missing
    items = store.items(ev.id, status="succeeded")
    assert len(items) == 6
    for item_id, data in kept.items():  # the first two untouched
        assert store.media(store.item(item_id)) == data
    for item in items:
        assert store.media(item)[:4] == b"RIFF"
        assert item.figures["latency_s"] > 0 and item.figures["ttfa_ms"] is not None
    assert run_items(store, ev.id, base=base).generated == 0

    # blind pairs: one per prompt, both variants, seeded (the same schedule twice)
    pairs = pairing.schedule(store, ev.id)
    assert len(pairs) == 3 and pairs == pairing.schedule(store, ev.id)
    by_id = {i.id: i for i in items}
    for p in pairs:
        assert {by_id[p.item_a].variant, by_id[p.item_b].variant} == {"clause", "sentence"}
    # rater X prefers "clause" on every pair but calls the last a tie; Y imports the same by CSV
    first = pairing.next_pair(store, ev.id, "X")
    assert first == pairs[0]
    for p in pairs[:2]:
        pairing.record_rating(store, ev.id, p.item_a, p.item_b,
                              "a" if by_id[p.item_a].variant == "clause" else "b", "X")
    pairing.record_rating(store, ev.id, pairs[2].item_a, pairs[2].item_b, "tie", "X")
    assert pairing.next_pair(store, ev.id, "X") is None and pairing.next_pair(store, ev.id, "Y") == pairs[0]
    lines = ["item_a,item_b,winner,rater"]
    for p in pairs:
        lines.append(f"{p.item_a},{p.item_b},{'a' if by_id[p.item_a].variant == 'clause' else 'b'},Y")
    assert import_ratings(store, ev.id, ("\n".join(lines) + "\n").encode()) == 3

    res = report.results(store, ev.id)
    clause, sentence = res["variants"]
    # clause: X 2 wins + 1 tie, Y 3 wins → 5 W, 0 L, 1 T over 6: (5 + 0.5)/6 = 0.916667
    assert (clause["ratings"], clause["wins"], clause["losses"], clause["ties"]) == (6, 5, 0, 1)
    assert clause["win_rate"] == pytest.approx(5.5 / 6)
    # Wilson, p = 0.916667, n = 6: z²/n = 0.640243, denominator 1.640243;
    # centre = (0.916667 + 0.320122)/1.640243 = 0.754028; half = 1.194922·√(0.012731 + 0.026677) = 0.237211
    # → [0.516817, 0.991239]
    assert clause["ci95"] == pytest.approx([0.516817, 0.991239], abs=2e-6)
    assert (sentence["wins"], sentence["losses"], sentence["ties"]) == (0, 5, 1)
    assert sentence["win_rate"] == pytest.approx(0.5 / 6)
    assert res["pairs"]["clause"]["sentence"] == {"n": 6, "wins": 5, "losses": 0, "ties": 1,
                                                 "win_rate": pytest.approx(5.5 / 6)}
    # X and Y agree on 2 of 3 pairs; κ computed in test_eval_stats
    [agree] = res["agreement"]
    assert agree["raters"] == ["X", "Y"] and agree["percent_agreement"] == pytest.approx(2 / 3)
    assert clause["items"] == 3 and clause["latency_n"] == 3 and clause["cost_per_item_usd"] is None
    assert res["raters"] == [{"name": "X", "ratings": 3}, {"name": "Y", "ratings": 3}]

    z = zipfile.ZipFile(io.BytesIO(export_zip(store, ev.id)))
    names = set(z.namelist())
    assert {"items.csv", "ratings.csv", "report.html"} <= names
    assert sum(n.startswith("media/") and n.endswith(".wav") for n in names) == 6
    page = z.read("report.html").decode()
    assert "http://" not in page and "https://" not in page and "<script" not in page
    assert len(z.read("ratings.csv").decode().strip().splitlines()) == 7
    blind = zipfile.ZipFile(io.BytesIO(export_zip(store, ev.id, blind=True)))
    sheet = blind.read("blind.html").decode()
    assert "clause" not in sheet and "sentence" not in sheet  # the labels stay hidden
    rows = blind.read("ratings.csv").decode().strip().splitlines()
    assert rows[0] == "item_a,item_b,winner,rater" and len(rows) == 4


def test_bad_ratings_files_import_nothing_and_name_the_line(tmp_path: Path) -> None:
    store = EvalStore(tmp_path)
    ev = store.create(parse_spec(spec_dict(prompts=["one", "two"])))
    items = store.items(ev.id)
    for item in items:  # outputs without a server: the import only needs succeeded items
        store.succeed(item, b"RIFF", {"latency_s": 1.0}, "voice")
    a0, b0 = [i.id for i in items if i.prompt_index == 0]
    a1, b1 = [i.id for i in items if i.prompt_index == 1]
    good = f"item_a,item_b,winner,rater\n{a0},{b0},a,X\n"
    cases = {
        good + "nosuch,{b0},a,X\n".replace("{b0}", b0): "line 3: item_a 'nosuch' is not an item",
        good + f"{a0},{a1},a,X\n": "line 3:",  # same variant
        good + f"{a0},{b1},b,X\n": "line 3:",  # different prompts
        good + f"{a1},{b1},maybe,X\n": "line 3: winner must be a, b or tie, not 'maybe'",
        good + f"{a1},{b1},a,\n": "line 3: the rater is empty",
        "item_a,item_b,rater\n": "no column(s) winner",
    }
    for text, needle in cases.items():
        with pytest.raises(InvalidInput) as exc:
            import_ratings(store, ev.id, text.encode())
        assert needle in str(exc.value) and "nothing was imported" in str(exc.value)
        assert store.ratings(ev.id) == []
    with pytest.raises(InvalidInput, match="same variant"):
        pairing.record_rating(store, ev.id, a0, a1, "a", "X")
    # an empty winner is a pair not rated
    assert import_ratings(store, ev.id, (good + f"{a1},{b1},,X\n").encode()) == 1
    with pytest.raises(InvalidInput, match="no evaluation 'nope'"):
        import_ratings(store, "nope", good.encode())


def test_a_variant_whose_target_is_down_fails_alone_and_is_retried(engine_url: str, tmp_path: Path) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    spec = parse_spec(spec_dict(prompts=["Hello there.", "Bye now."],
                                variants=[{"label": "up", "url": engine_url, "price_per_hour": 3.6},
                                          {"label": "down", "backend": "server"}]))
    store = EvalStore(tmp_path / "data")
    ev = store.create(spec)
    first = run_items(store, ev.id, base=Settings(data_dir=tmp_path / "data", server_url=dead))
    assert first.generated == 2 and len(first.failed) == 2
    assert {f["variant"] for f in first.failed} == {"down"} and dead in first.failed[0]["error"]
    assert [i.variant for i in store.items(ev.id, status="succeeded")] == ["up", "up"]
    again = run_items(store, ev.id, base=Settings(data_dir=tmp_path / "data", server_url=engine_url))
    assert again.generated == 2 and not again.failed  # only the failed ones, now that the target is up
    assert len(store.items(ev.id, status="succeeded")) == 4
    # priced at $3.6/h: each item costs latency_s × 3.6 / 3600 = latency_s / 1000; the cost per item is their mean
    up = [i for i in store.items(ev.id) if i.variant == "up"]
    for i in up:
        assert i.figures["cost_usd"] == pytest.approx(i.figures["latency_s"] / 1000)
    res = report.results(store, ev.id)
    assert res["variants"][0]["cost_per_item_usd"] == pytest.approx(sum(i.figures["latency_s"] for i in up) / 2000)
    assert res["variants"][0]["cost_n"] == 2
    assert res["variants"][1]["cost_per_item_usd"] is None and res["variants"][1]["cost_n"] == 0


def test_a_spec_and_a_kept_evaluation_saying_backend_omni_still_load_and_run(engine_url: str, tmp_path: Path) -> None:
    """`backend = "omni"`, a vLLM-Omni server's former name, in a SPEC file and in an evaluation the history kept
    before the rename (its spec and its items), is read as "server" and runs on that server."""
    (tmp_path / "spec.toml").write_text(
        'name = "old"\nmodality = "voice"\nprompts = ["Hello there."]\nintelligibility = "none"\n'
        f'[[variants]]\nlabel = "a"\nbackend = "omni"\nurl = "{engine_url}"\n'
        '[[variants]]\nlabel = "b"\nbackend = "omni"\nsplit = "sentence"\n', encoding="utf-8")
    spec = load_spec(tmp_path / "spec.toml")
    assert [v["backend"] for v in spec.variants] == ["server", "server"]
    store = EvalStore(tmp_path / "data")
    ev = store.create(spec)
    with store.history.transaction() as db:  # the rows as a studio before the rename wrote them
        db.execute("UPDATE evaluations SET spec = ? WHERE id = ?",
                   (ev.spec.model_dump_json().replace('"backend":"server"', '"backend":"omni"'), ev.id))
        db.execute("UPDATE eval_items SET settings = REPLACE(settings, '\"server\"', '\"omni\"') "
                   "WHERE evaluation_id = ?", (ev.id,))
    assert all(i.settings["backend"] == "omni" for i in store.items(ev.id))  # (the rows really say omni)
    kept = store.get(ev.id)
    assert [v["backend"] for v in kept.spec.variants] == ["server", "server"]
    out = run_items(store, ev.id, base=Settings(data_dir=tmp_path / "data", server_url=engine_url))
    assert out.generated == 2 and not out.failed


def test_three_variants_are_paired_about_equally(tmp_path: Path) -> None:
    spec = parse_spec(spec_dict(prompts=[f"p{i}" for i in range(9)],
                                variants=[{"label": "a"}, {"label": "b"}, {"label": "c"}]))
    store = EvalStore(tmp_path)
    ev = store.create(spec)
    for item in store.items(ev.id):
        store.succeed(item, b"RIFF", {"latency_s": 1.0}, "voice")
    pairs = pairing.schedule(store, ev.id)
    by_id = {i.id: i for i in store.items(ev.id)}
    counts: dict[frozenset[str], int] = {}
    firsts = set()
    for p in pairs:
        key = frozenset((by_id[p.item_a].variant, by_id[p.item_b].variant))
        counts[key] = counts.get(key, 0) + 1
        firsts.add(by_id[p.item_a].variant)
    # 9 prompts × (3 − 1) pairs = 18, over 3 pairs of variants: 6 each
    assert len(pairs) == 18 and sorted(counts.values()) == [6, 6, 6]
    assert len(firsts) > 1  # the order within a pair is shuffled


def test_image_and_video_evaluations_and_a_stop_button(engine_url: str, tmp_path: Path) -> None:
    import threading
    base = Settings(data_dir=tmp_path, backend="server", server_url=engine_url)
    store = EvalStore(tmp_path)
    image = store.create(parse_spec({"name": "img", "modality": "image", "prompts": ["a lighthouse at dawn"],
                                     "variants": [{"label": "s4", "size": "256x256", "steps": 4, "seed": 1},
                                                  {"label": "s8", "size": "256x256", "steps": 8, "seed": 1}]}))
    assert run_items(store, image.id, base=base).generated == 2
    for item in store.items(image.id):
        assert store.media(item)[:8] == b"\x89PNG\r\n\x1a\n" and item.figures["latency_s"] > 0
    video = store.create(parse_spec({"name": "vid", "modality": "video", "prompts": ["the camera pans", "a wave"],
                                     "variants": [{"label": "f9", "frames": 9, "width": 256, "height": 256, "steps": 2},
                                                  {"label": "f17", "frames": 17, "width": 256, "height": 256,
                                                   "steps": 2}]}))
    stop = threading.Event()
    out = run_items(store, video.id, base=base, stop=stop, on_progress=lambda p: stop.set())
    assert out.stopped and out.generated == 1 and len(store.items(video.id, status="pending")) == 3
    assert run_items(store, video.id, base=base).generated == 3
    for item in store.items(video.id):
        assert b"ftyp" in store.media(item)[:16]


def test_an_output_file_deleted_under_its_record_is_listed_as_missing_in_the_exports(tmp_path: Path) -> None:
    store = EvalStore(tmp_path)
    ev = store.create(parse_spec(spec_dict(prompts=["one", "two"])))
    items = store.items(ev.id)
    for item in items:
        store.succeed(item, b"RIFF" + item.id.encode(), {"latency_s": 1.0}, "voice")
    gone = store.item(items[0].id)
    path = store.history.media.root / f"eval-{ev.id}" / gone.media
    path.unlink()  # deleted from the media folder behind the studio's back
    for blind in (False, True):
        z = zipfile.ZipFile(io.BytesIO(export_zip(store, ev.id, blind=blind)))
        names = set(z.namelist())
        assert f"media/{gone.media}" not in names and "MISSING.txt" in names
        listed = z.read("MISSING.txt").decode()
        assert f"media/{gone.media}\titem {gone.id}\tlooked for in {store.history.media.root}" in listed
        if not blind:  # every other output is there
            assert sum(n.startswith("media/") for n in names) == len(items) - 1
        page = z.read("blind.html" if blind else "report.html").decode()
        assert f"missing: media/{gone.media}" in page


# ---- checked against the target before it is made; edited before ratings; deleted ---------------------------
def test_a_voice_or_language_the_target_lacks_is_refused_at_create_naming_what_it_offers(
        engine_url: str, tmp_path: Path) -> None:
    from services.eval.runner import target_offer
    base = Settings(data_dir=tmp_path / "data", backend="server", server_url=engine_url)
    store, offer = EvalStore(base.data_dir), target_offer(base, "voice")
    # The offline engine speaks Qwen3-TTS CustomVoice's nine speakers and ten languages; not a made-up one.
    unknown = parse_spec(spec_dict(variants=[{"label": "a", "voice": "zelda"}, {"label": "b", "voice": "joe"}]))
    with pytest.raises(InvalidInput, match=r"variant 'a': voice 'zelda' is not one of its target's voices: pick "
                                           r"one of .*vivian"):
        store.create(unknown, offer=offer)
    klingon = parse_spec(spec_dict(variants=[{"label": "a", "language": "English"},
                                             {"label": "b", "language": "Klingon"}]))
    with pytest.raises(InvalidInput, match=r"variant 'b': language 'Klingon' is not one of its target's languages: "
                                           r"pick one of Auto, .*Chinese"):
        store.create(klingon, offer=offer)
    assert store.list() == []  # nothing made
    ok = store.create(parse_spec(spec_dict(variants=[{"label": "a", "voice": "VIVIAN", "language": "chinese"},
                                                     {"label": "b"}])), offer=offer)
    assert ok.spec.labels == ["a", "b"]
    down = Settings(data_dir=tmp_path / "data", backend="server", server_url="http://127.0.0.1:9")
    assert target_offer(down, "voice")({"voice": "vivian"}) is None  # cannot be asked now: its run says why


def test_an_evaluation_is_edited_until_rated_and_deleted_with_its_outputs(engine_url: str, tmp_path: Path) -> None:
    base = Settings(data_dir=tmp_path / "data", backend="server", server_url=engine_url)
    store = EvalStore(base.data_dir)
    ev = store.create(parse_spec(spec_dict(prompts=["One."])))
    run_items(store, ev.id, base=base)
    old = [store.history.media.root / f"eval-{ev.id}" / i.media for i in store.items(ev.id)]
    assert all(p.is_file() for p in old)
    edited = store.update(ev.id, parse_spec(spec_dict(name="renamed", prompts=["One.", "Two."])))
    assert edited.name == "renamed" and edited.spec.prompts == ["One.", "Two."]
    items = store.items(ev.id)
    assert len(items) == 4 and {i.status for i in items} == {"pending"} and not any(p.exists() for p in old)
    with pytest.raises(InvalidInput, match="its modality cannot change"):
        store.update(ev.id, parse_spec(spec_dict(modality="image", variants=[{"label": "a"}, {"label": "b"}])))
    run_items(store, ev.id, base=base)
    pair = pairing.next_pair(store, ev.id, "ana")
    pairing.record_rating(store, ev.id, pair.item_a, pair.item_b, "a", "ana")
    with pytest.raises(InvalidInput, match="has 1 rating: what was rated stays as it was"):
        store.update(ev.id, parse_spec(spec_dict(name="again")))
    folder = store.history.media.root / f"eval-{ev.id}"
    assert folder.is_dir()
    store.delete(ev.id)
    assert store.list() == [] and not folder.exists() and store.ratings(ev.id) == [] and store.items(ev.id) == []


def test_a_spec_may_say_family_the_catalogs_word_for_modality():
    spec = parse_spec({"name": "x", "family": "image", "prompts": ["a lighthouse"],
                       "variants": [{"label": "a"}, {"label": "b"}]})
    assert spec.modality == "image"
    with pytest.raises(InvalidInput, match=r"family = 'image' and modality = 'voice': give one"):
        parse_spec({"name": "x", "family": "image", "modality": "voice", "prompts": ["a"],
                    "variants": [{"label": "a"}, {"label": "b"}]})
