"""Hand it over as code, in a real browser (#36's proof): Debian Chromium (Playwright) and the studio on its own
offline engine, in a loopback-only network namespace (tests/browser_support.py).

The scenario makes a seeded image on the Image page, opens its "</> Code" panel, reads the Python off the page —
the code block's text in the DOM, which is what its copy button copies — writes it to a fresh folder and runs it
there unchanged (`python code.py`: the studio not on its path, BASE_URL the engine the page used, since the engine
lives in the namespace and ends with it). The test then compares the PNG the script wrote with the one the studio
kept: the same bytes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from services.history import History

CODE_DIR_ENV = "OMNI_TEST_CODE_DIR"  # the fresh folder the copied code is run in
CODE_PANEL = "Code — make it again from a script"


def scenario(studio) -> dict:
    """Runs inside the namespace (see tests/browser_support.py)."""
    from protocol.images import IMAGES_PATH

    page = studio.page
    studio.open_page("Image", "image")
    prompt = page.get_by_role("textbox", name="Prompt", exact=True)
    prompt.wait_for(timeout=90_000)  # the backend (offline engine) is up
    prompt.fill("A lighthouse on a cliff at dawn")
    page.get_by_role("textbox", name="Size (WxH)").fill("256x192")
    page.get_by_role("textbox", name="Seed").fill("7")
    page.get_by_role("button", name="Generate").click()
    page.get_by_text("Offline preview", exact=False).first.wait_for(timeout=90_000)

    panel = page.locator('[data-testid="stExpander"]').filter(has_text=CODE_PANEL).first
    panel.get_by_text(CODE_PANEL).click()  # opens it on its first tab, Python
    block = panel.locator('[data-testid="stCode"] code').first
    block.wait_for(state="visible")
    python = block.inner_text()

    job = History(Path(os.environ["OMNI_STUDIO_DATA_DIR"])).jobs.list("image")[0]
    folder = Path(os.environ[CODE_DIR_ENV])
    folder.mkdir(parents=True)
    (folder / "code.py").write_text(python)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OMNI_STUDIO_DATA_DIR", CODE_DIR_ENV)}
    ran = subprocess.run([sys.executable, "code.py"], cwd=folder, capture_output=True, text=True, timeout=120,
                         env={**env, "BASE_URL": job.target.removesuffix(IMAGES_PATH)})
    return {"python": python, "job_id": job.id, "returncode": ran.returncode, "stdout": ran.stdout,
            "stderr": ran.stderr[-3000:]}


def test_an_images_python_copied_off_the_page_runs_unchanged_and_makes_the_same_png(tmp_path: Path) -> None:
    from tests.browser_support import require_browser, run_browser_scenario

    require_browser()
    data, folder = tmp_path / "data", tmp_path / "code"
    r = run_browser_scenario("tests.test_browser_code:scenario", timeout=300,
                             env={"OMNI_STUDIO_DATA_DIR": str(data), "OMNI_STUDIO_CONFIG": "",
                                  CODE_DIR_ENV: str(folder)})
    assert "client.images.generate(" in r["python"] and '"seed": 7' in r["python"], r["python"]
    assert r["returncode"] == 0, r["stdout"] + r["stderr"]
    assert r["stdout"].strip() == "image.png"
    job = History(data).jobs.get(r["job_id"])
    kept = job.file(job.outputs[0])
    assert kept[:8] == b"\x89PNG\r\n\x1a\n" and (folder / "image.png").read_bytes() == kept
