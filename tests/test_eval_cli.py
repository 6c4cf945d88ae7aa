"""`python -m services eval` as a subprocess on the real offline engine: run (killed mid-run, then resumed), the
blind sheet filled and imported, the report's statistics against hand-computed values, the bad inputs."""

from __future__ import annotations

import csv
import io
import json
import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.test_speech_cli import ROOT, cli_env
from tests.cli_support import run_cli

PROMPTS = ["Hello there.", "Good morning, everyone.", "The weather is fine today."]


def env_for(data: Path) -> dict[str, str]:
    return {**cli_env(), "OMNI_STUDIO_DATA_DIR": str(data)}


def ev(data: Path, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return run_cli([sys.executable, "-m", "services", "eval", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env_for(data))


def write_spec(path: Path, url: str, **extra: str) -> Path:
    lines = ['name = "split styles"', 'modality = "voice"', f"prompts = {json.dumps(PROMPTS)}", "repeats = 1",
             *[f"{k} = {v}" for k, v in extra.items()],
             "[[variants]]", 'label = "A"', f'url = "{url}"', 'split = "clause"',
             "[[variants]]", 'label = "B"', f'url = "{url}"', 'split = "sentence"']
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_run_killed_resumed_rated_and_reported(engine_url: str, tmp_path: Path) -> None:
    data = tmp_path / "data"
    spec = write_spec(tmp_path / "spec.toml", engine_url)
    proc = subprocess.Popen([sys.executable, "-m", "services", "eval", "run", str(spec)], cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env_for(data))
    try:
        header = proc.stderr.readline()
        eval_id = header.split()[1].rstrip(":")
        assert eval_id.startswith("ev-"), header
        assert proc.stderr.readline().startswith("[1/6]")  # one item made: kill the run mid-way
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    listed = json.loads(ev(data, "list", "--json").stdout)
    [row] = listed
    made = row["succeeded"]
    assert row["id"] == eval_id and 1 <= made <= 6 and row["items"] == 6

    p = ev(data, "run", str(spec), "--resume", eval_id, "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out == {"id": eval_id, "items": 6, "failed": 0, "generated": 6 - made}  # only what was missing

    # the blind sheet, filled: X calls every pair a tie, Y prefers A every time
    blind_zip = tmp_path / "blind.zip"
    assert ev(data, "export", eval_id, "--blind", "--out", str(blind_zip)).returncode == 0
    full_zip = tmp_path / "full.zip"
    assert ev(data, "export", eval_id, "--out", str(full_zip)).returncode == 0
    variant = {r["id"]: r["variant"] for r in csv.DictReader(io.StringIO(
        zipfile.ZipFile(full_zip).read("items.csv").decode()))}
    sheet = list(csv.DictReader(io.StringIO(zipfile.ZipFile(blind_zip).read("ratings.csv").decode())))
    assert len(sheet) == 3
    filled = ["item_a,item_b,winner,rater"]
    for r in sheet:
        filled.append(f"{r['item_a']},{r['item_b']},tie,X")
        filled.append(f"{r['item_a']},{r['item_b']},{'a' if variant[r['item_a']] == 'A' else 'b'},Y")
    ratings = tmp_path / "ratings.csv"
    ratings.write_text("\n".join(filled) + "\n", encoding="utf-8")
    p = ev(data, "import", eval_id, str(ratings))
    assert p.returncode == 0 and "imported 6 ratings" in p.stdout, p.stderr

    rep = json.loads(ev(data, "report", eval_id, "--format", "json").stdout)
    a, b = rep["variants"]
    # A: 3 wins (Y), 0 losses, 3 ties (X) over 6 ratings → (3 + 3/2)/6 = 0.75
    assert (a["label"], a["items"], a["ratings"], a["wins"], a["losses"], a["ties"]) == ("A", 3, 6, 3, 0, 3)
    assert a["win_rate"] == pytest.approx(0.75)
    # Wilson p = 0.75, n = 6: z²/n = 0.640243, denominator 1.640243, centre = 1.070122/1.640243 = 0.652416,
    # half = 1.194922·√(0.1875/6 + 3.841459/144) = 1.194922·√0.057927 = 0.287594 → [0.364822, 0.940010]
    assert a["ci95"] == pytest.approx([0.364822, 0.940010], abs=2e-6)
    # B mirrors A: 0.25, [1 − 0.940010, 1 − 0.364822]
    assert (b["wins"], b["losses"], b["ties"], b["win_rate"]) == (0, 3, 3, 0.25)
    assert b["ci95"] == pytest.approx([0.059990, 0.635178], abs=2e-6)
    assert a["latency_p50_s"] > 0 and a["ttfa_p50_ms"] is not None and a["cost_per_item_usd"] is None
    assert rep["pairs"]["A"]["B"] == {"n": 6, "wins": 3, "losses": 0, "ties": 3, "win_rate": 0.75}
    assert rep["raters"] == [{"name": "X", "ratings": 3}, {"name": "Y", "ratings": 3}]
    # X and Y agree on no pair: p_o = 0; X all tie, Y all one side → p_e = 0, κ = 0
    assert rep["agreement"][0]["percent_agreement"] == 0 and rep["agreement"][0]["kappa"] == 0
    # the intervals overlap; at 0.75 vs 0.25 they part at 16 ratings each (test_eval_stats): 16 − 6 = 10 more
    assert rep["separation"] == [{"a": "A", "b": "B", "overlap": True, "more_ratings": 10, "n_each": 16}]

    md = ev(data, "report", eval_id, "--format", "md").stdout
    assert "about 10 more ratings would separate them" in md and "| A | 3 | 6 | 3 / 0 / 3 | 0.750 |" in md
    csv_text = ev(data, "report", eval_id, "--format", "csv").stdout
    assert csv_text.splitlines()[1].startswith("A,3,0,6,3,0,3,0.75,")
    html_out = tmp_path / "report.html"
    assert ev(data, "report", eval_id, "--format", "html", "--out", str(html_out)).returncode == 0
    assert "no significant difference yet" in html_out.read_text(encoding="utf-8")

    # a bad file: rejected naming its line, nothing imported
    bad = tmp_path / "bad.csv"
    bad.write_text(f"item_a,item_b,winner,rater\n{sheet[0]['item_a']},{sheet[0]['item_b']},a,Z\n"
                   f"{sheet[1]['item_a']},{sheet[1]['item_b']},A wins,Z\n", encoding="utf-8")
    p = ev(data, "import", eval_id, str(bad))
    assert p.returncode == 1 and "line 3: winner must be a, b or tie" in p.stderr
    assert json.loads(ev(data, "list", "--json").stdout)[0]["ratings"] == 6


def test_bad_specs_and_ids_exit_1_naming_what_to_fix(tmp_path: Path) -> None:
    data = tmp_path / "data"
    spec = write_spec(tmp_path / "spec.toml", "http://127.0.0.1:9", speed="2")
    p = ev(data, "run", str(spec))
    assert p.returncode == 1 and "unknown key(s) in the SPEC: speed" in p.stderr
    big = tmp_path / "big.toml"
    big.write_text(write_spec(tmp_path / "x.toml", "http://127.0.0.1:9").read_text().replace(
        f"prompts = {json.dumps(PROMPTS)}", f"prompts = {json.dumps([f'p{i}' for i in range(501)])}"), encoding="utf-8")
    p = ev(data, "run", str(big))
    assert p.returncode == 1 and "confirm with --yes" in p.stderr
    p = ev(data, "report", "ev-nope")
    assert p.returncode == 1 and "no evaluation 'ev-nope'" in p.stderr
    assert ev(data, "list").stdout.startswith("no evaluations yet")


def test_a_target_that_is_down_lists_the_failed_items_and_how_to_retry(tmp_path: Path) -> None:
    from tests.conftest import free_port
    data = tmp_path / "data"
    dead = f"http://127.0.0.1:{free_port()}"
    spec = write_spec(tmp_path / "spec.toml", dead)
    p = ev(data, "run", str(spec), "--json")
    assert p.returncode == 1
    out = json.loads(p.stdout)
    assert out["items"] == 6 and out["failed"] == 6 and out["generated"] == 0
    assert sum(line.startswith("failed: ") for line in p.stderr.splitlines()) == 6 and dead in p.stderr
    assert f"--resume {out['id']}" in p.stderr
    p = ev(data, "run", str(spec), "--resume", out["id"], "--json")  # still down: retried, still failed, nothing lost
    assert p.returncode == 1 and json.loads(p.stdout)["failed"] == 6
    other = tmp_path / "other.toml"
    other.write_text(spec.read_text().replace("repeats = 1", "repeats = 2"), encoding="utf-8")
    p = ev(data, "run", str(other), "--resume", out["id"])
    assert p.returncode == 1 and "the SPEC differs" in p.stderr and "repeats" in p.stderr
