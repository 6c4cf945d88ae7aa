"""A team studio of two replicas in a real browser: replicas a and b (`streamlit run serve.py` each, with its own
offline engine and data folder) on one PostgreSQL database (this test process's cluster, through its socket) and
one bucket (moto's S3, SSE off), behind HAProxy (Debian's) with cookie stickiness and the replicas' storage-aware
health route as its check, all inside the loopback-only namespace of tests/browser_support.py.

Chromium signs in through the local OpenID Connect provider on the proxy's address and lands on one replica
(HAProxy's SERVERID cookie says which); makes an image and a voice take there. A second tab, with the same
sign-in cookie but the other replica's SERVERID, sees both in that replica's lists — the image through a presigned
URL of the bucket. Then the first replica is killed (SIGKILL): the first browser reloads onto the other, still
signed in, and sees its image.

And a video job: the replicas' target is the SageMaker emulator; Chromium sends a text-to-video job from one
replica, which is killed while the job is on the async endpoint; the reload lands on the other, whose keeper takes
the job over when its 2 s lease lapses, polls it to the end, keeps the MP4 in the bucket and plays it in the page
(a presigned URL).

And the Endpoints page: an admin's two tabs, one on each replica, press Deploy at once on the emulator; one
deploys, the other says who holds the team's lock (the state's advisory lock in PostgreSQL) and, reloaded, shows
the deployment the other replica is making (tests/test_shared_state.py has the same without a browser).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from bench.haproxy_front import HAPROXY, INSTALL, haproxy
from bench.page_waits import poll, settled

DATABASE_ENV = "OMNI_TEST_REPLICAS_DATABASE"
REPLICAS = ("a", "b")
BUCKET = "omni-studio-team"
SENTENCE = "Two replicas share one history."
VIDEO_ENDPOINT = "sm-video"
VIDEO_ON_ENDPOINT_S = 12.0  # an async video job stays on the endpoint this long: the replica that sent it dies meanwhile
MEDIA_PREFIX = "media"
RUNNING: dict[str, subprocess.Popen] = {}  # the replicas of the scenario's team studio, by name
EMULATOR: dict[str, Any] = {}  # "handle": the SageMaker emulator of a team studio on SageMaker
ROLE_ARN = "arn:aws:iam::123456789012:role/omni-studio-team"


@contextmanager
def team_studio(port: int, log: Path, *, sagemaker: bool = False) -> Iterator[None]:
    """The scenario's server (browser_support's `studio_server`): moto, two replicas and HAProxy on `port`. With
    `sagemaker`: the replicas' target is the SageMaker emulator (its own offline engine, moto for S3), where an
    async video endpoint takes VIDEO_ON_ENDPOINT_S per job, and a job's lease is 2 s."""
    from emulator.launch import start_moto
    from offline.launch import free_port, spawn, stop, wait_http_ok
    from tests.test_browser_signin import COOKIE_SECRET, POLICY

    folder = log.parent
    with ExitStack() as stack, start_moto() as s3:
        import boto3

        creds = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
                 "AWS_ENDPOINT_URL_S3": s3}
        boto3.client("s3", endpoint_url=s3, region_name="us-east-1", aws_access_key_id="testing",
                     aws_secret_access_key="testing").create_bucket(Bucket=BUCKET)
        secrets = folder / "secrets.toml"  # the proxy's address: sign-in comes back through it
        secrets.write_text(f'[auth]\nredirect_uri = "http://127.0.0.1:{port}/oauth2callback"\n'
                           f'cookie_secret = "{COOKIE_SECRET}"\nclient_id = "omni-studio"\n'
                           'client_secret = "local-oidc-secret-not-for-real-use"\n'
                           f'server_metadata_url = "http://127.0.0.1:{os.environ["OMNI_TEST_OIDC_PORT"]}'
                           '/.well-known/openid-configuration"\n')
        if sagemaker:
            from emulator.handle import deploy_endpoint, running_emulator
            from offline.launch import start_engine

            engine = start_engine()
            stack.callback(engine.stop)
            emulator = stack.enter_context(running_emulator(engine.url, s3, folder / "emulator"))
            deploy_endpoint(emulator, VIDEO_ENDPOINT, async_output=f"s3://{BUCKET}/outputs",
                            environment={"SM_VLLM_MODEL": "Wan-AI/Wan2.1-VACE-1.3B-diffusers"})
            emulator.configure(delays={"async_s": VIDEO_ON_ENDPOINT_S})
            EMULATOR["handle"] = emulator
            creds = {**creds, **emulator.env(), "OMNI_STUDIO_BACKEND": "sagemaker",
                     "OMNI_STUDIO_VIDEO_ENDPOINT": VIDEO_ENDPOINT, "OMNI_STUDIO_BUCKET": BUCKET,
                     "OMNI_STUDIO_JOB_LEASE_S": "2", "OMNI_STUDIO_REGION": emulator.region,
                     "OMNI_STUDIO_INFRA_POLL_S": "0.5", "SAGEMAKER_EXECUTION_ROLE_ARN": ROLE_ARN}
        ports = {name: free_port() for name in REPLICAS}
        for name, replica_port in ports.items():
            env = {**os.environ, **creds, "OMNI_STUDIO_DATABASE_URL": os.environ[DATABASE_ENV],
                   "OMNI_STUDIO_MEDIA_URL": f"s3://{BUCKET}/{MEDIA_PREFIX}", "OMNI_STUDIO_REPLICA": name,
                   "OMNI_STUDIO_DATA_DIR": str(folder / name), "OMNI_STUDIO_STATE_FILE": str(folder / name / "state.json"),
                   "OMNI_STUDIO_CONFIG": "", "OMNI_STUDIO_ACCESS": json.dumps(POLICY),
                   "STREAMLIT_SECRETS_FILES": str(secrets)}
            out = stack.enter_context(open(folder / f"replica-{name}.log", "wb"))
            proc = spawn("streamlit", ["run", "serve.py", "--server.address", "127.0.0.1", "--server.port",
                                       str(replica_port), "--server.headless", "true", "--browser.gatherUsageStats",
                                       "false", "--server.fileWatcherType", "none"], name=f"replica {name}", env=env,
                         stdout=out)
            RUNNING[name] = proc
            stack.callback(stop, proc)
        for name, replica_port in ports.items():
            wait_http_ok(f"http://127.0.0.1:{replica_port}/_stcore/health", RUNNING[name], timeout=90,
                         what=f"replica {name}",
                         log_tail=lambda n=name: (folder / f"replica-{n}.log").read_text(errors="replace")[-3000:])
        stack.enter_context(haproxy(port, ports, folder, sticky=True))
        log.write_text(f"HAProxy on {port} in front of {ports}; the replicas' logs: "
                       f"{', '.join(str(folder / f'replica-{n}.log') for n in REPLICAS)}\n")
        yield


def replica_of(context: Any) -> str:
    """The replica HAProxy keeps this browser on (its SERVERID cookie)."""
    return next(c["value"] for c in context.cookies() if c["name"] == "SERVERID")


def sign_in_through_the_proxy(page: Any, who: str) -> str:
    """Sign `who` in through the local provider (started by the caller); the replica the browser landed on."""
    from tests.test_browser_signin import sign_in

    page.get_by_role("button", name="Sign in").wait_for(timeout=60_000)
    sign_in(page, who)
    return replica_of(page.context)


def run_on_the_team(pg_cluster: Any, scenario: str, *, timeout: float = 400,
                    read: Any = None) -> tuple[dict, Any]:
    """Run `scenario` of this module on a team studio of its own database; (its result, `read(database URL)` made
    before the database is dropped)."""
    from tests.browser_support import require_browser, run_browser_scenario
    from tests.test_browser_signin import OIDC_PORT, OIDC_PORT_ENV

    require_browser()
    assert Path(HAPROXY).exists(), f"HAProxy is not installed: {INSTALL}"
    name = pg_cluster.database()
    try:
        r = run_browser_scenario(f"tests.test_browser_replicas:{scenario}", timeout=timeout,
                                 env={DATABASE_ENV: pg_cluster.url(name), OIDC_PORT_ENV: str(OIDC_PORT)})
        return r, (read(pg_cluster.url(name)) if read else None)
    finally:
        pg_cluster.drop(name)


def jobs_of(kind: str, folder: Path) -> Any:
    """`read` for run_on_the_team: the team history's jobs of `kind`, as the studio keeps them."""
    from services.history import History

    def read(url: str) -> list:
        history = History(folder, database_url=url)
        try:
            return history.jobs.list(kind)
        finally:
            history.close()
    return read


def scenario(studio) -> dict:
    """Runs inside the namespace (see tests/browser_support.py)."""
    from tests.test_browser_signin import generate_image, provider, settled_text

    page, out = studio.page, {}
    with provider(studio):
        first = out["first_replica"] = sign_in_through_the_proxy(page, "Bob Creator")
        studio.open_page("Image", "image")
        out["image_made"] = generate_image(page, "A lighthouse two replicas share")
        studio.open_page("Voice", "voice")
        box = page.get_by_role("textbox", name="Text")
        box.wait_for(timeout=60_000)
        box.fill(SENTENCE)
        with studio.rerun("the rerun that takes the text"):
            box.press("Control+Enter")
        page.get_by_role("button", name="Speak").click()
        page.get_by_text("Last utterance").wait_for(timeout=90_000)
        settled(page, "the take kept")

        # A second tab of the same person (the same sign-in cookie: one cookie_secret for all replicas), on the other
        # replica: the browser's SERVERID cookie names it for the tab's requests, then names the first one again.
        other = next(name for name in REPLICAS if name != first)
        context = page.context
        context.add_cookies([{"name": "SERVERID", "value": other, "url": studio.url}])
        second_page = context.new_page()
        target = context
        second_page.goto(f"{studio.url}/image")
        second_page.get_by_text("seed 7").first.wait_for(timeout=60_000)
        out["second_replica"] = replica_of(target)
        out["image_seen"] = settled_text(second_page, lambda text: "A lighthouse two replicas share" in text)
        out["image_src"] = second_page.locator('[data-testid="stImage"] img').first.get_attribute("src")
        out["image_loaded"] = second_page.locator('[data-testid="stImage"] img').first.evaluate(
            "img => img.complete && img.naturalWidth")
        second_page.goto(f"{studio.url}/voice")
        out["voice_seen"] = settled_text(second_page, lambda text: SENTENCE in text and "Takes" in text, timeout=60)
        second_page.close()
        context.add_cookies([{"name": "SERVERID", "value": first, "url": studio.url}])

        # The first replica dies: this browser's next load (its cookie still names the first) goes to the other, signed in.
        RUNNING[first].send_signal(signal.SIGKILL)
        RUNNING[first].wait(30)
        studio.goto("image")
        page.get_by_text("Signed in as").first.wait_for(timeout=60_000)
        out["after_kill"] = settled_text(page, lambda text: "A lighthouse two replicas share" in text, timeout=60)
        out["after_kill_replica"] = replica_of(page.context)
        out["sidebar"] = page.locator('[data-testid="stSidebar"]').inner_text()
    return out


scenario.studio_server = team_studio


def test_two_replicas_behind_a_sticky_proxy_share_one_history_and_survive_one_dying(pg_cluster, tmp_path) -> None:
    r, images = run_on_the_team(pg_cluster, "scenario", read=jobs_of("image", tmp_path / "reader"))
    made_by = [job.owner for job in images]
    assert len(made_by) == 1 and made_by[0].startswith(f"{r['first_replica']}:")  # the image's replica, by name
    assert r["first_replica"] in REPLICAS and r["second_replica"] != r["first_replica"]
    assert "Offline preview" in r["image_made"] and "seed 7" in r["image_made"]
    assert "A lighthouse two replicas share" in r["image_seen"]
    assert r["image_src"].startswith("http://127.0.0.1:") and "X-Amz-Signature=" in r["image_src"]  # the bucket's
    assert r["image_loaded"] > 0
    assert SENTENCE in r["voice_seen"]
    assert r["after_kill_replica"] != r["first_replica"]
    assert "Signed in as Bob Creator" in r["sidebar"] and "A lighthouse two replicas share" in r["after_kill"]


_VIDEO_STATE = """
() => {
  const v = document.querySelector('[data-testid="stMain"] video');
  return v ? {readyState: v.readyState, error: v.error ? v.error.code : null, src: v.currentSrc} : null;
}
"""


def scenario_video(studio) -> dict:
    """Runs inside the namespace: a video job sent from one replica, that replica killed, the other finishes it."""
    from tests.test_browser_signin import provider, settled_text

    page, out = studio.page, {}
    with provider(studio):
        first = out["first_replica"] = sign_in_through_the_proxy(page, "Bob Creator")
        studio.open_page("Video", "video")
        page.get_by_text("No reference (text only)").click()
        motion = page.get_by_role("textbox", name="Motion prompt")
        motion.fill("A slow pan over hills that outlives its replica")
        with studio.rerun("the rerun that takes the motion prompt"):
            motion.press("Control+Enter")
        page.get_by_role("button", name="Generate").click()
        out["running"] = settled_text(page, lambda text: "running" in text and "outlives its replica" in text,
                                      timeout=60)
        RUNNING[first].send_signal(signal.SIGKILL)  # while the job is on the endpoint
        RUNNING[first].wait(30)
        studio.goto("video")  # the reload lands on the other replica, which takes the job over when its lease lapses
        page.get_by_text("Signed in as").first.wait_for(timeout=60_000)
        out["after_kill_replica"] = replica_of(page.context)
        state = poll(lambda: page.evaluate(_VIDEO_STATE), lambda v: v is not None and v["readyState"] >= 1, 150,
                     what="the video the other replica finished, loaded in its player")
        out["video"] = state
        out["finished"] = settled_text(page, lambda text: "succeeded" in text, timeout=60)
    return out


scenario_video.studio_server = partial(team_studio, sagemaker=True)


def test_a_video_job_whose_replica_dies_is_finished_by_the_other_and_shown_there(pg_cluster, tmp_path) -> None:
    r, [job] = run_on_the_team(pg_cluster, "scenario_video", read=jobs_of("video", tmp_path / "reader"))
    assert r["after_kill_replica"] != r["first_replica"]
    assert job.status == "succeeded" and job.owner.startswith(f"{r['after_kill_replica']}:")  # taken over
    assert job.outputs == ["video.mp4"]
    assert r["video"]["error"] is None and f"/{BUCKET}/{MEDIA_PREFIX}/{job.id}/video.mp4" in r["video"]["src"]
    assert "X-Amz-Signature=" in r["video"]["src"]  # the bucket's, presigned


def scenario_deploy(studio) -> dict:
    """Runs inside the namespace: an admin's two tabs, one on each replica's Endpoints page, press Deploy at once."""
    from tests.test_browser_signin import main_text, provider, settled_text

    page, out = studio.page, {}
    with provider(studio):
        sign_in_through_the_proxy(page, "Ann Admin")
        EMULATOR["handle"].configure(delays={"create_s": 600})  # the first deploy holds the lock while it waits
        context, tabs = page.context, {}
        for name in REPLICAS:  # each tab's connection is made to the replica the cookie names as it opens
            context.add_cookies([{"name": "SERVERID", "value": name, "url": studio.url}])
            tab = tabs[name] = context.new_page()
            tab.goto(f"{studio.url}/endpoints")
            tab.get_by_text("No deployment yet").wait_for(timeout=60_000)
            tab.get_by_role("button", name="Deploy", exact=True).wait_for(timeout=30_000)
        for tab in tabs.values():
            tab.get_by_role("button", name="Deploy", exact=True).click()
        said = {}
        for name, tab in tabs.items():  # each tab's own outcome, caught as it is drawn: refused, or deploying
            tab.get_by_text("is in use: held by").or_(tab.get_by_text("deploy — running")).first.wait_for(
                timeout=90_000)
            said[name] = main_text(tab)
        refused = [name for name, text in said.items() if "is in use: held by" in text]
        out["refused"] = refused
        out["refusal"] = said[refused[0]] if refused else ""
        if refused:  # the refused tab's next run shows the deployment the other replica is making
            other = tabs[refused[0]]
            other.reload()
            out["refused_tab_after"] = settled_text(other, lambda text: "No deployment yet" not in text
                                                    and "Actions" in text, timeout=60)
        out["tabs"] = {name: main_text(tab)[:3000] for name, tab in tabs.items()}
    return out


scenario_deploy.studio_server = partial(team_studio, sagemaker=True)


def test_two_replicas_endpoints_pages_press_deploy_at_once_one_deploys_the_other_names_it(pg_cluster) -> None:
    r, _ = run_on_the_team(pg_cluster, "scenario_deploy")
    assert len(r["refused"]) == 1, r["tabs"]
    assert "the deployment state state.json (shared in postgresql+psycopg://" in r["refusal"]
    assert "held by `python -m infra deploy` from the studio's Endpoints page (pid" in r["refusal"]
    assert "Actions" in r["refused_tab_after"] and "No deployment yet" not in r["refused_tab_after"]
