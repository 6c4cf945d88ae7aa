"""`python -m services code` for an evaluation's item: the request its variant's settings made for its prompt, to
the variant's target — run unchanged against the offline engine, the same PNG bytes as the item the evaluation kept
(a seeded image) and a take of the same format; a variant of kept results hands over the kept item's own code."""

from __future__ import annotations

import io
import wave
from pathlib import Path

import pytest

from services.access import Principal
from services.code import generate
from services.eval import EvalStore, parse_spec, run_items
from services.history import History
from services.settings import Settings
from tests.code_support import code_for, made, run_code


def test_an_image_evaluations_items_again_each_variant_its_own_settings(engine_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    base = Settings(data_dir=data, backend="server", server_url=engine_url)
    store = EvalStore(data)
    ev = store.create(parse_spec({"name": "steps", "modality": "image", "prompts": ["a lighthouse at dawn"],
                                  "variants": [{"label": "s4", "size": "128x128", "steps": 4, "seed": 5,
                                                "url": engine_url},
                                               {"label": "s8", "size": "128x128", "steps": 8, "seed": 5}]}))
    assert run_items(store, ev.id, base=base).generated == 2
    items = {i.variant: i for i in store.items(ev.id)}
    assert store.media(items["s4"]) != store.media(items["s8"])  # (the bytes below can differ)
    for label, item in items.items():
        script = code_for(item.id, tmp_path / label, data=data)
        text = script.read_text()
        assert f'"num_inference_steps": {label[1:]}' in text and f"variant {label}" in text
        run_code(script, engine_url)
        assert (tmp_path / label / "image.png").read_bytes() == store.media(item), label
    assert "ran on the studio's default target" in code_for(items["s8"].id, tmp_path / "n", data=data).read_text()

    history = History(data)
    try:
        stranger = history.acting_as(Principal(id="eve", name="Eve", role="creator", signed_in=True))
        with pytest.raises(Exception, match=ev.id):  # someone else's unshared evaluation: refused by the store
            generate(stranger, items["s4"].id)
    finally:
        history.close()


def test_a_voice_evaluation_item_and_a_kept_variant(engine_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    base = Settings(data_dir=data, backend="server", server_url=engine_url)
    image = made("image", "--url", engine_url, "--prompt", "a red kite", "--size", "64x64", "--seed", "2", "--out",
                 "kite.png", data=data, cwd=tmp_path)
    store = EvalStore(data)
    ev = store.create(parse_spec({"name": "voices", "modality": "voice", "prompts": ["Good morning, harbour."],
                                  "variants": [{"label": "a", "language": "English", "url": engine_url},
                                               {"label": "b", "instructions": "slow and warm", "url": engine_url}]}))
    assert run_items(store, ev.id, base=base).generated == 2
    item = next(i for i in store.items(ev.id) if i.variant == "b")
    script = code_for(item.id, tmp_path / "voice", data=data)
    assert '"instructions": "slow and warm"' in script.read_text()
    run_code(script, engine_url)
    with wave.open(str(tmp_path / "voice" / "speech.wav")) as got, wave.open(io.BytesIO(store.media(item))) as kept:
        assert (got.getnchannels(), got.getsampwidth(), got.getframerate()) == \
            (kept.getnchannels(), kept.getsampwidth(), kept.getframerate())
        assert got.getnframes() > 0

    kept = store.create(parse_spec({"name": "kept", "modality": "image", "prompts": [],
                                    "variants": [{"label": "k", "kept": [image["job_id"]]},
                                                 {"label": "n", "size": "64x64", "seed": 2, "url": engine_url}]}))
    from_kept = next(i for i in store.items(kept.id) if i.variant == "k")
    script = code_for(from_kept.id, tmp_path / "kept", data=data)
    assert f"the kept image job {image['job_id']}" in script.read_text()
    run_code(script, engine_url)
    assert (tmp_path / "kept" / "image.png").read_bytes() == (tmp_path / "kite.png").read_bytes()


def test_a_sagemaker_variants_item_names_its_endpoint_and_region(tmp_path: Path) -> None:
    store = EvalStore(tmp_path / "data")
    ev = store.create(parse_spec({"name": "sm", "modality": "image", "prompts": ["a kite"],
                                  "variants": [{"label": "sm", "backend": "sagemaker", "endpoint": "omni-image",
                                                "region": "eu-west-1", "steps": 4, "seed": 9},
                                               {"label": "here", "steps": 4}]}))
    item = next(i for i in store.items(ev.id) if i.variant == "sm")  # pending: its code is its request
    code = generate(store.history, item.id)
    assert 'os.environ.get("ENDPOINT_NAME", "omni-image")' in code.text, code.text[:800]
    assert 'os.environ.get("REGION", "eu-west-1")' in code.text and "invoke_endpoint(" in code.text
    assert '"seed": 9' in code.text
