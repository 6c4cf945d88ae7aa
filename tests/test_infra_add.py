"""`python -m infra add`: an endpoint added to a running deployment, on the local SageMaker emulator (real boto3, the
offline engine behind it). Deploy voice, add sound: planned with the deployment's own settings (names, tags, image,
role, TTL schedule and the TTL role's permission), created, smoke-tested alone; status lists both, a second smoke
runs both, delete removes both. A crash mid-way (the wait given up) leaves the new endpoint in the spec, and
`resume` finishes it. Refusals say what to do: a family already there, an unknown one (naming the catalog's), no
state file, an option naming an endpoint that is not added, a pool that cannot hold the model, a deployment being
deleted — and nothing is created or recorded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.cli import main as infra_main
from infra.state import DeploymentState
from protocol.sound import SOUND_MODEL

pytest.register_assert_rewrite("tests.emulator_support")
from tests.emulator_support import ROLE_ARN, EmulatorHandle  # noqa: E402

pytest_plugins = ["tests.emulator_support"]

CLI_FAST = ["--poll-seconds", "0.05", "--wait-timeout", "30"]


def _endpoints(emulator: EmulatorHandle) -> list[str]:
    return sorted(e["EndpointName"] for e in emulator.client("sagemaker").list_endpoints()["Endpoints"])


def _deploy_voice(state_file: Path, capsys: pytest.CaptureFixture[str]) -> DeploymentState:
    assert infra_main(["deploy", "voice", "--no-smoke", "--state-file", str(state_file), "--role-arn", ROLE_ARN,
                       "--tags", "owner=ana", "--name-prefix", "lab", *CLI_FAST]) == 0
    capsys.readouterr()
    return DeploymentState.load(state_file)


def test_add_sound_to_a_voice_deployment_then_status_smoke_and_delete_treat_it_like_any_other(
        emulator_env: EmulatorHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state_file, smoke_dir = tmp_path / "state.json", tmp_path / "smoke"
    before = _deploy_voice(state_file, capsys)
    voice = before.record("voice").endpoint.name

    code = infra_main(["add", "sound", "--json", "--smoke-dir", str(smoke_dir), "--state-file", str(state_file),
                       *CLI_FAST])
    out = capsys.readouterr()
    assert code == 0, out.err
    data = json.loads(out.out)
    assert sorted(data["endpoints"]) == ["sound"] and data["deployment_id"] == before.deployment_id
    assert [c["role"] for c in data["smoke"]["checks"]] == ["sound"] and data["smoke"]["ok"]  # the new one only
    assert "sound recorded in" in out.err and "quotas allow" in out.err

    state = DeploymentState.load(state_file)
    assert state.spec.roles == ("voice", "sound") and state.phase == "deployed"
    sound = state.record("sound").endpoint.name
    assert sound == f"lab-sound-{state.deployment_id}"  # the deployment's name prefix and id
    assert state.record("sound").smoke["ok"] and state.record("voice").endpoint.name == voice
    sm = emulator_env.client("sagemaker")
    model = sm.describe_model(ModelName=state.record("sound").model.name)
    assert model["PrimaryContainer"]["Environment"]["SM_VLLM_MODEL"] == SOUND_MODEL
    assert model["ExecutionRoleArn"] == ROLE_ARN
    assert model["PrimaryContainer"]["Image"] == state.spec.image_uri
    tags = {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=state.record("sound").endpoint.arn)["Tags"]}
    assert tags["omni-studio:deployment"] == state.deployment_id and tags["owner"] == "ana"
    assert tags["omni-studio:role"] == "sound"
    # the TTL: its own schedule at the deployment's expiry, and the TTL role may delete it too
    ttl = state.ttl
    assert ttl is not None and set(ttl["schedules"]) == {"voice", "sound"}
    sch = emulator_env.client("scheduler")
    assert sorted(s["Name"] for s in sch.list_schedules(GroupName=ttl["schedule_group"])["Schedules"]) == \
        sorted([voice, sound])
    times = {n: sch.get_schedule(Name=n, GroupName=ttl["schedule_group"])["ScheduleExpression"] for n in (voice, sound)}
    assert times[voice] == times[sound]
    iam = emulator_env.client("iam")
    policy = iam.get_role_policy(RoleName=ttl["role_arn"].rsplit("/", 1)[-1],
                                 PolicyName="omni-studio-delete-endpoints")["PolicyDocument"]
    assert policy["Statement"][0]["Resource"] == sorted(
        f"arn:aws:sagemaker:us-east-1:{state.spec.account}:endpoint/{n}" for n in (voice, sound))

    assert infra_main(["status", "--state-file", str(state_file), "--json"]) == 0
    rows = {r["role"]: r for r in json.loads(capsys.readouterr().out)["endpoints"]}
    assert set(rows) == {"voice", "sound"} and {r["status"] for r in rows.values()} == {"InService"}
    assert infra_main(["smoke", "--json", "--state-file", str(state_file), "--out-dir", str(smoke_dir)]) == 0
    assert [c["role"] for c in json.loads(capsys.readouterr().out)["checks"]] == ["voice", "sound"]

    # a second add of the same family is refused, naming what may be added instead
    assert infra_main(["add", "sound", "--state-file", str(state_file), *CLI_FAST]) == 2
    err = capsys.readouterr().err
    assert f"already has a sound endpoint ({sound})" in err and "can add image, video, listen, omni" in err

    assert infra_main(["delete", "--state-file", str(state_file), *CLI_FAST]) == 0
    assert _endpoints(emulator_env) == [] and not state_file.exists()
    assert [g["Name"] for g in sch.list_schedule_groups()["ScheduleGroups"]] == ["default"]


def test_an_add_cut_short_is_finished_by_resume_and_a_removed_endpoint_can_be_added_again(
        emulator_env: EmulatorHandle, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state_file = tmp_path / "state.json"
    _deploy_voice(state_file, capsys)
    # the wait given up at once: the endpoint is recorded and Creating, the command fails (as a crash would leave it)
    code = infra_main(["add", "listen", "--no-smoke", "--state-file", str(state_file), "--poll-seconds", "0.05",
                       "--wait-timeout", "0"])
    assert code != 0, capsys.readouterr().err
    capsys.readouterr()
    state = DeploymentState.load(state_file)
    assert state.spec.roles == ("voice", "listen") and state.phase != "deployed"
    assert state.record("listen").endpoint.exists
    # a second add says it is unfinished and how to finish it
    assert infra_main(["add", "listen", "--state-file", str(state_file), *CLI_FAST]) == 2
    assert "recorded but not finished: run `python -m infra resume`" in capsys.readouterr().err
    assert infra_main(["resume", "--no-smoke", "--state-file", str(state_file), *CLI_FAST]) == 0
    capsys.readouterr()
    state = DeploymentState.load(state_file)
    assert state.phase == "deployed" and state.record("listen").endpoint_status == "InService"

    # one endpoint deleted on its own, then added again: the deployment takes it back
    assert infra_main(["delete", "listen", "--state-file", str(state_file), *CLI_FAST]) == 0
    assert DeploymentState.load(state_file).spec.roles == ("voice",)
    assert infra_main(["add", "listen", "--no-smoke", "--state-file", str(state_file), *CLI_FAST]) == 0
    state = DeploymentState.load(state_file)
    assert state.spec.roles == ("voice", "listen") and state.phase == "deployed"
    assert infra_main(["delete", "--state-file", str(state_file), *CLI_FAST]) == 0
    assert _endpoints(emulator_env) == []


def test_refusals_name_what_to_do_and_leave_nothing_behind(emulator_env: EmulatorHandle, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    state_file = tmp_path / "state.json"
    assert infra_main(["add", "sound", "--state-file", str(state_file)]) == 6
    err = capsys.readouterr().err
    assert "no deployment to add to" in err and "python -m infra deploy --with sound" in err

    state = _deploy_voice(state_file, capsys)
    saved = state_file.read_bytes()
    voice = state.record("voice").endpoint.name
    refused = {
        ("voice",): "already has a voice endpoint",
        ("speech",): "unknown family 'speech': the catalog has voice, image, video, listen, omni, sound; "
                     "this deployment can add image, video, listen, omni, sound",
        (): "name the family to add: this deployment can add image",
        ("sound", "--model", "image=black-forest-labs/FLUX.2-klein-4B"): "names the image endpoint, which this "
                                                                         "command does not add (it adds sound)",
        ("sound", "--model", "sound=black-forest-labs/FLUX.2-klein-4B"): "is an image model",
        ("sound", "--instance-types", "sound=ml.g4dn.xlarge"): "the sound endpoint's pool cannot serve its model",
    }
    for args, words in refused.items():
        assert infra_main(["add", *args, "--state-file", str(state_file), *CLI_FAST]) == 2, args
        assert words in capsys.readouterr().err, args
    assert state_file.read_bytes() == saved and _endpoints(emulator_env) == [voice]

    # a deployment being deleted (its endpoint going, the state saying so) takes nothing
    data = json.loads(saved)
    data["phase"] = "deleting"
    state_file.write_text(json.dumps(data))
    emulator_env.client("sagemaker").delete_endpoint(EndpointName=voice)
    assert infra_main(["add", "sound", "--state-file", str(state_file), *CLI_FAST]) == 6
    err = capsys.readouterr().err
    assert f"deployment {state.deployment_id} is being deleted" in err and "python -m infra delete" in err
    assert _endpoints(emulator_env) in ([], [voice])  # going; nothing new
    assert "sound" not in DeploymentState.load(state_file).endpoints
    assert infra_main(["delete", "--state-file", str(state_file), *CLI_FAST]) == 0
