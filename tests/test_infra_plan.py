"""`python -m infra plan` against the emulator: quotas as deploy reads them, prices from the Price List
stand-in (or the bundled table when the API cannot be reached, said with its date), a recommendation per
endpoint whose `deploy` line really deploys, and the regions it cannot read named with the reason."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from emulator.pricing import PRICES
from infra.cli import main as infra_main
from infra.plan import PlanEntry, choose, plan_regions, with_fallbacks
from infra.pricing import load_prices

if TYPE_CHECKING:
    from tests.emulator_support import EmulatorHandle

pytest_plugins = ["tests.emulator_support"]
ROLE_ARN = "arn:aws:iam::123456789012:role/omni-studio-sagemaker-execution"
CLI_FAST = ["--poll-seconds", "0.05", "--wait-timeout", "30"]
USE1 = PRICES["us-east-1"]


def test_plan_recommends_the_cheapest_entries_with_quota_and_its_deploy_line_deploys(
        emulator_env: EmulatorHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    assert infra_main(["plan", "--regions", "us-east-1", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    (region,) = data["regions"]
    assert region["ok"] and region["prices"]["source"] == "price list"
    assert region["prices"]["api_date"] == "2026-11-14"  # the stand-in's publicationDate
    voice = {e["instance_type"]: e for e in region["entries"] if e["role"] == "voice"}
    assert list(voice) == ["ml.g6.xlarge", "ml.g6e.xlarge", "ml.g5.xlarge", "ml.g4dn.xlarge"]
    assert voice["ml.g4dn.xlarge"] == {"role": "voice", "instance_type": "ml.g4dn.xlarge", "priority": 4,
                                       "quota": 4.0, "in_use": 0, "free": 4.0, "available": True,
                                       "usd_per_hour": USE1["ml.g4dn.xlarge"], "price_source": "price list",
                                       "gpu": "1× T4 16 GB", "model_id": "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice",
                                       "fits": True, "misfit": None}
    assert region["gpu_fit"]["voice"].startswith("needs ≈ 5.1 GB; fits on ml.g4dn.xlarge")
    rec = region["recommendation"]
    assert {r: c["instance_type"] for r, c in rec.items()} == {
        "voice": "ml.g4dn.xlarge", "image": "ml.g6.xlarge", "video": "ml.g6.xlarge"}
    assert region["usd_per_hour"] == pytest.approx(USE1["ml.g4dn.xlarge"] + 2 * USE1["ml.g6.xlarge"])
    command = region["deploy_command"]
    assert command == ("python -m infra deploy --region us-east-1 --instance-types voice=ml.g4dn.xlarge "
                       "--instance-types image=ml.g6.xlarge --instance-types video=ml.g6.xlarge")
    assert region["fallback_command"].startswith("python -m infra deploy --region us-east-1 --instance-types "
                                                 "voice=ml.g4dn.xlarge,ml.g6.xlarge,ml.g5.xlarge")

    # The recommended line deploys as it stands.
    state_file = tmp_path / "plan-state.json"
    argv = shlex.split(command)[3:] + ["--state-file", str(state_file), "--role-arn", ROLE_ARN, "--no-smoke", *CLI_FAST]
    assert infra_main(argv) == 0, capsys.readouterr().err
    capsys.readouterr()
    # Planned again, the instances those endpoints hold are in use.
    report = plan_regions(["us-east-1"])
    in_use = {e.instance_type: e.in_use for e in report.regions[0].entries}
    assert in_use["ml.g4dn.xlarge"] == 1 and in_use["ml.g6.xlarge"] == 2
    assert infra_main(["delete", "--state-file", str(state_file), *CLI_FAST]) == 0


def test_plan_text_names_quota_shortfalls_and_the_regions_it_cannot_read(emulator_env: EmulatorHandle,
                                                                        capsys: pytest.CaptureFixture[str]):
    emulator_env.configure(quotas={"ml.g6.xlarge": 1, "ml.g4dn.xlarge": 0})
    report = plan_regions(["us-east-1"])
    plan = report.regions[0]
    types = sorted(c.instance_type for c in plan.choices.values())
    assert types == ["ml.g5.xlarge", "ml.g5.xlarge", "ml.g6.xlarge"]  # one g6 free: the others take g5
    assert plan.usd_per_hour == pytest.approx(USE1["ml.g6.xlarge"] + 2 * USE1["ml.g5.xlarge"])
    # The fall-back pools still pass deploy's quota check (g6 as a fall-back would need a second free g6).
    for role, pool in plan.fallback_pools.items():
        assert "ml.g4dn.xlarge" not in pool.types
        assert pool.first == plan.choices[role].instance_type

    emulator_env.configure(quotas={"ml.g6.xlarge": 0, "ml.g6e.xlarge": 0, "ml.g5.xlarge": 0, "ml.g4dn.xlarge": 1})
    assert infra_main(["plan", "--regions", "US-EAST-1,eu-west-1"]) == 0
    out = capsys.readouterr().out
    assert "voice: ml.g4dn.xlarge at $0.7364/hour" in out
    assert "image: no pool entry has quota free here" in out and "video: no pool entry has quota free here" in out
    assert "recommended" not in out
    assert "region eu-west-1\n  could not be read: " in out and "signed for eu-west-1" in out
    assert "no region has quota for every endpoint" in out
    assert infra_main(["plan", "voice", "--regions", "us-east-1", "--json"]) == 0
    voice_only = json.loads(capsys.readouterr().out)["regions"][0]
    assert voice_only["deploy_command"] == "python -m infra deploy voice --region us-east-1 --instance-types ml.g4dn.xlarge"


def test_plan_falls_back_to_the_bundled_table_when_the_price_list_cannot_be_reached(
        emulator_env: EmulatorHandle, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    from offline.launch import free_port

    monkeypatch.setenv("AWS_ENDPOINT_URL_PRICING", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    assert infra_main(["plan", "--regions", "us-east-1", "--json"]) == 0
    region = json.loads(capsys.readouterr().out)["regions"][0]
    table = load_prices()
    assert region["prices"]["source"] == "table" and region["prices"]["table_date"] == table.as_of.isoformat()
    assert "the AWS Price List API could not be reached" in region["prices"]["fallback_reason"]
    assert {e["price_source"] for e in region["entries"]} == {"table"}
    assert region["recommendation"]["voice"]["usd_per_hour"] == table.hourly("ml.g4dn.xlarge", "us-east-1").usd_per_hour
    assert infra_main(["plan", "--regions", "us-east-1"]) == 0
    assert f"prices from the bundled price table (services/prices.json), as of {table.as_of.isoformat()} — the AWS " \
           "Price List API could not be reached" in capsys.readouterr().out


def test_plan_refuses_an_unknown_region_before_any_call(capsys: pytest.CaptureFixture[str]):
    assert infra_main(["plan", "--regions", "us-east-1,us-eas-1"]) == 2
    assert "--regions 'us-eas-1' is not an AWS region (did you mean us-east-1?)" in capsys.readouterr().err


def test_choose_places_every_endpoint_within_the_free_quota():
    def entry(role, t, prio, free, usd):
        return PlanEntry(role, t, prio, float(free), 0, usd, "price list")

    entries = [entry("voice", "a", 1, 1, 1.0), entry("voice", "b", 2, 5, 3.0),
               entry("image", "a", 1, 1, 1.0), entry("image", "c", 2, 5, 2.0)]
    choices = choose(["voice", "image"], entries)
    # Only one "a" is free: the cheaper overall assignment gives it to voice (b costs more than c).
    assert {r: c.instance_type for r, c in choices.items()} == {"voice": "a", "image": "c"}
    pools = with_fallbacks(choices, entries)
    assert pools["voice"].types == ("a", "b") and pools["image"].types == ("c",)  # "a" as fall-back: no 2nd free


def test_plan_shows_gpu_memory_per_entry_and_never_recommends_one_the_model_does_not_fit(
        emulator_env: EmulatorHandle, capsys: pytest.CaptureFixture[str]):
    from infra.model import InstancePool
    from infra.plan import render

    # g4dn (T4, 16 GB) is the cheapest entry, but FLUX.2-klein-4B needs ≈ 20.2 GB: the image endpoint takes g6.
    pools = {"image": InstancePool(("ml.g4dn.xlarge", "ml.g6.xlarge"))}
    report = plan_regions(["us-east-1"], roles=["image"], pools=pools)
    plan = report.regions[0]
    g4dn = next(e for e in plan.entries if e.instance_type == "ml.g4dn.xlarge")
    assert g4dn.free >= 1 and not g4dn.available and "needs ≈ 20.2 GB" in g4dn.misfit
    assert plan.choices["image"].instance_type == "ml.g6.xlarge"
    text = render(report)
    assert "1× T4 16 GB" in text and "1× L4 24 GB" in text
    assert "ml.g4dn.xlarge cannot serve it: black-forest-labs/FLUX.2-klein-4B needs ≈ 20.2 GB" in text
    assert "image: black-forest-labs/FLUX.2-klein-4B needs ≈ 20.2 GB; fits on ml.g5.xlarge" in text
    only_small = plan_regions(["us-east-1"], roles=["image"], pools={"image": InstancePool(("ml.g4dn.xlarge",))})
    assert not only_small.regions[0].ok
    assert "no pool entry has the GPU memory its model needs" in render(only_small)
    # On the command line the plan says the same, per entry.
    assert infra_main(["plan", "image", "--regions", "us-east-1"]) == 0
    out = capsys.readouterr().out
    assert "GPU memory" in out and "image: black-forest-labs/FLUX.2-klein-4B needs ≈ 20.2 GB" in out
