"""The price range of each endpoint's pool (`python -m infra cost`, the Endpoints page): every entry's $/hour in
priority order and the min–max, against a hand-made price table and the shipped one."""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, date, datetime
from pathlib import Path

from infra.model import LARGE_GPU_POOL, PUBLISHED_POOL, DeployOptions
from infra.planning import plan
from infra.pool_prices import deployment_pool_prices, planned_pool_prices, pool_prices
from infra.pricing import PriceTable, load_prices
from infra.state import DeploymentState
from tests.cli_support import run_cli

pytest_plugins = ["tests.emulator_support"]

ROOT = Path(__file__).resolve().parent.parent
TABLE = PriceTable("hand-made", date(2026, 1, 1), "USD",
                   {"us-east-1": {"ml.g6.xlarge": 1.0, "ml.g6e.xlarge": 2.5, "ml.g5.xlarge": 1.5}})


def test_range_and_entries_by_hand():
    r = pool_prices("voice", PUBLISHED_POOL, "us-east-1", TABLE, endpoint="v", in_use="ml.g6e.xlarge")
    assert (r.min_usd, r.max_usd) == (1.0, 2.5) and r.unpriced == ["ml.g4dn.xlarge"]  # g4dn is not in this table
    assert r.range_label() == "$1.0000–$2.5000/h"
    assert r.label() == ("$1.0000–$2.5000/h: ml.g6.xlarge $1.0000, ml.g6e.xlarge $2.5000 (in use), "
                         "ml.g5.xlarge $1.5000, ml.g4dn.xlarge no price")
    d = r.to_dict()
    assert [e["instance_type"] for e in d["entries"]] == list(PUBLISHED_POOL)
    assert (d["min_usd_per_hour"], d["max_usd_per_hour"], d["in_use"]) == (1.0, 2.5, "ml.g6e.xlarge")


def test_one_price_no_price_and_another_region():
    assert pool_prices("image", ["ml.g6.xlarge"], "us-east-1", TABLE).range_label() == "$1.0000/h"
    assert pool_prices("image", ["ml.p5.48xlarge"], "us-east-1", TABLE).range_label() == "no price"
    # a region the table lacks: us-east-1's rates stand in, and the label says so
    assert pool_prices("image", ["ml.g6.xlarge", "ml.g5.xlarge"], "eu-west-1", TABLE).range_label() == \
        "$1.0000–$1.5000/h (≈, us-east-1 rates)"


def test_planned_pools_from_the_shipped_table():
    shipped = load_prices()
    ranges = {r.role: r for r in planned_pool_prices("us-east-1", shipped)}
    voice, image = ranges["voice"], ranges["image"]
    assert [p.instance_type for p in voice.entries] == list(PUBLISHED_POOL)
    assert [p.instance_type for p in image.entries] == list(LARGE_GPU_POOL)
    rates = [shipped.hourly(t, "us-east-1").usd_per_hour for t in PUBLISHED_POOL]
    assert (voice.min_usd, voice.max_usd) == (min(rates), max(rates))


def test_a_deployment_marks_the_entry_in_use(tmp_path: Path):
    spec = plan(DeployOptions(role_arn="arn:aws:iam::123456789012:role/x", roles=("voice", "image")),
                account="123456789012", creator="arn:aws:iam::123456789012:user/ana", region="us-east-1",
                now=datetime(2026, 1, 1, tzinfo=UTC), deployment_id="260101-000000-abcd")
    state = DeploymentState.new(spec, tmp_path / "state.json")
    state.endpoints["image"].instance_type = "ml.g5.xlarge"  # what the state file saw provisioned
    ranges = {r.role: r for r in deployment_pool_prices(state, TABLE, {"voice": "ml.g6.xlarge"})}
    assert ranges["voice"].in_use == "ml.g6.xlarge" and ranges["image"].in_use == "ml.g5.xlarge"
    assert ranges["image"].endpoint == spec.endpoint("image").endpoint_name


def test_infra_cost_prints_every_pool_entry(tmp_path: Path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    base = [sys.executable, "-m", "infra", "cost", "--state-file", str(tmp_path / "none.json")]
    r = run_cli(base + ["--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    pools = {p["role"]: p for p in json.loads(r.stdout)["pools"]}
    assert set(pools) == {"voice", "image", "video"}
    assert pools["voice"]["min_usd_per_hour"] == 0.7364 and pools["voice"]["max_usd_per_hour"] == 2.61
    r = run_cli(base + ["--instance-types", "ml.g5.xlarge,ml.g6.xlarge"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "price range of each endpoint's pool" in r.stdout
    assert "$1.1267–$1.4080/h" in r.stdout and "ml.g5.xlarge $1.4080, ml.g6.xlarge $1.1267" in r.stdout


def test_the_endpoints_page_shows_each_pools_range(emulator_env, monkeypatch, tmp_path: Path):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from tests.emulator_support import deploy_endpoint

    spec = plan(DeployOptions(role_arn="arn:aws:iam::123456789012:role/x", roles=("voice", "image")),
                account=emulator_env.account_id, creator="arn:aws:iam::123456789012:user/ana", region=emulator_env.region,
                now=datetime(2026, 1, 1, tzinfo=UTC), deployment_id="260101-000000-abcd")
    state = DeploymentState.new(spec, tmp_path / "state.json")
    state.save()
    deploy_endpoint(emulator_env, spec.endpoint("voice").endpoint_name)  # the published pool; g6 has capacity
    for key, value in {"OMNI_STUDIO_CONFIG": "", "OMNI_STUDIO_DATA_DIR": str(tmp_path / "data"),
                       "OMNI_STUDIO_STATE_FILE": str(state.path), "OMNI_STUDIO_BACKEND": "sagemaker",
                       "OMNI_STUDIO_COST_BANNER": "off"}.items():
        monkeypatch.setenv(key, value)
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.switch_page("pages/endpoints.py")
    at.run()
    assert not at.exception, at.exception[0].message if at.exception else ""
    rows = {r["endpoint"]: r for r in at.dataframe[0].value.to_dict("records")}
    shipped = load_prices()
    rates = [shipped.hourly(t, emulator_env.region).usd_per_hour for t in PUBLISHED_POOL]
    assert rows["voice"]["pool $/hour (min–max)"] == f"${min(rates):.4f}–${max(rates):.4f}/h"
    assert "ml.g6.xlarge $1.1267 (in use)" in rows["voice"]["pool entries"]
    assert rows["image"]["status"] == "gone" and rows["image"]["pool $/hour (min–max)"] == "$1.1267–$2.6100/h"
    assert "ml.g4dn.xlarge" not in rows["image"]["pool entries"]
