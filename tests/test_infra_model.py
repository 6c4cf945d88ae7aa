"""Infra without AWS: the deployment model and its requests, the state file, quota arithmetic, prices."""

from __future__ import annotations

import json
import threading
from datetime import UTC, date, datetime
from pathlib import Path

import botocore.session
import pytest
from botocore.validate import ParamValidator

from infra.errors import StateError, UsageError
from infra.model import (
    INFERENCE_AMI_VERSION,
    LARGE_GPU_POOL,
    PUBLISHED_POOL,
    TAG_DEPLOYMENT,
    DeploymentSpec,
    DeployOptions,
    InstancePool,
)
from infra.planning import parse_tags, plan
from infra.pricing import PriceTable, cost_so_far, load_prices, price_from_products
from infra.quotas import evaluate, needed_counts
from infra.state import DeploymentState

ACCOUNT = "123456789012"
ROLE = f"arn:aws:iam::{ACCOUNT}:role/omni-studio-sagemaker"
NOW = datetime(2026, 12, 2, 11, 16, 45, tzinfo=UTC)


def make_spec(**options) -> DeploymentSpec:
    opts = DeployOptions(role_arn=ROLE, **options)
    return plan(opts, account=ACCOUNT, creator=f"arn:aws:iam::{ACCOUNT}:user/ana", region="us-east-1", now=NOW,
                deployment_id="261202-111645-abcd")


def validate(operation: str, params: dict) -> None:
    """Check a request against botocore's own SageMaker input shape (what boto3 would send)."""
    model = botocore.session.get_session().get_service_model("sagemaker")
    report = ParamValidator().validate(params, model.operation_model(operation).input_shape)
    assert not report.has_errors(), report.generate_report()


# ---------------------------------------------------------------------------------------------------------
def test_default_plan_has_three_endpoints_from_one_pinned_image():
    spec = make_spec()
    assert spec.roles == ("voice", "image", "video")
    assert spec.image_uri == "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:omni-sagemaker-cuda-v1.6"
    models = {e.role: e.environment["SM_VLLM_MODEL"] for e in spec.endpoints}
    assert models == {"voice": "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice", "image": "black-forest-labs/FLUX.2-klein-4B",
                      "video": "Wan-AI/Wan2.1-VACE-1.3B-diffusers"}
    assert spec.endpoint("video").environment["SM_VLLM_VAE_USE_TILING"] == "true"
    assert "SM_VLLM_VAE_USE_TILING" not in spec.endpoint("image").environment
    assert spec.endpoint("voice").pool.types == PUBLISHED_POOL
    assert spec.endpoint("image").pool.types == LARGE_GPU_POOL
    assert spec.bucket == f"omni-studio-{ACCOUNT}-us-east-1"
    assert spec.endpoint("voice").endpoint_name == "omni-studio-voice-261202-111645-abcd"


def test_requests_are_valid_boto3_input_with_the_published_settings():
    spec = make_spec(kms_key="alias/studio", subnets=["subnet-0123456789abcdef0"],
                     security_groups=["sg-0123456789abcdef0"], tags=["cost-center=42"])
    for ep in spec.endpoints:
        model = spec.create_model_request(ep)
        config = spec.create_endpoint_config_request(ep)
        endpoint = spec.create_endpoint_request(ep)
        validate("CreateModel", model)
        validate("CreateEndpointConfig", config)
        validate("CreateEndpoint", endpoint)
        assert model["VpcConfig"] == {"Subnets": ["subnet-0123456789abcdef0"], "SecurityGroupIds": ["sg-0123456789abcdef0"]}
        variant = config["ProductionVariants"][0]
        assert variant["InferenceAmiVersion"] == INFERENCE_AMI_VERSION
        assert variant["InitialInstanceCount"] == 1
        assert [p["Priority"] for p in variant["InstancePools"]] == list(range(1, len(ep.pool.types) + 1))
        assert "InstanceType" not in variant
        assert "KmsKeyId" not in config  # refused for NVMe instance types; the key protects S3 instead
        tags = {t["Key"]: t["Value"] for t in endpoint["Tags"]}
        assert tags["project"] == "omni-studio" and tags["omni-studio:role"] == ep.role
        assert tags[TAG_DEPLOYMENT] == spec.deployment_id and tags["cost-center"] == "42"
        assert tags["omni-studio:creator"].endswith(":user/ana") and tags["omni-studio:created"] == "2026-12-02T11:16:45Z"
    timeouts = {e.role: spec.create_endpoint_config_request(e)["ProductionVariants"][0]
                ["ContainerStartupHealthCheckTimeoutInSeconds"] for e in spec.endpoints}
    assert timeouts["image"] == 1800 and timeouts["video"] == 3600
    video = spec.create_endpoint_config_request(spec.endpoint("video"))
    assert video["AsyncInferenceConfig"] == {
        "OutputConfig": {"S3OutputPath": f"s3://{spec.bucket}/omni-studio/outputs/",
                         "S3FailurePath": f"s3://{spec.bucket}/omni-studio/failures/", "KmsKeyId": "alias/studio"},
        "ClientConfig": {"MaxConcurrentInvocationsPerInstance": 1}}
    assert "AsyncInferenceConfig" not in spec.create_endpoint_config_request(spec.endpoint("voice"))


def test_instance_types_narrow_every_pool_or_one_endpoint():
    spec = make_spec(instance_types=["g6e.xlarge,ml.g5.xlarge", "voice=ml.g4dn.xlarge"])
    assert spec.endpoint("image").pool.types == ("ml.g6e.xlarge", "ml.g5.xlarge")
    assert spec.endpoint("voice").pool.types == ("ml.g4dn.xlarge",)
    single = spec.create_endpoint_config_request(spec.endpoint("voice"))["ProductionVariants"][0]
    assert single["InstanceType"] == "ml.g4dn.xlarge" and "InstancePools" not in single


@pytest.mark.parametrize("types, words", [
    ("ml.g6.xlarge,ml.g6.xlarge", "unique"),
    ("ml.g6.xlarge,ml.g6e.xlarge,ml.g5.xlarge,ml.g4dn.xlarge,ml.g6.2xlarge,ml.g5.2xlarge", "1 to 5"),
    ("ml.g6.hugexlarge", "not a SageMaker endpoint instance type"),
    ("ml.g6.xlarge,", "empty instance type"),
])
def test_bad_pools_are_named(types, words):
    with pytest.raises(UsageError, match=words):
        make_spec(instance_types=[types])


@pytest.mark.parametrize("options, words", [
    ({"role_arn": "not-an-arn"}, "--role-arn"),
    ({"bucket": "Bad_Bucket"}, "--bucket"),
    ({"subnets": ["subnet-0123456789abcdef0"]}, "both --subnets and --security-groups"),
    ({"name_prefix": "bad_prefix"}, "--name-prefix"),
    ({"name_prefix": "x" * 50}, "--name-prefix"),
    ({"instance_types": ["voice=ml.g6.xlarge"], "roles": ["image"]}, "does not include"),
    ({"tags": ["omni-studio:role=x"]}, "reserved"),
    ({"tags": ["novalue"]}, "KEY=VALUE"),
    ({"model_s3_uri": ["http://x"]}, "--model-s3-uri"),
    ({"roles": []}, "no endpoint"),
])
def test_bad_options_are_named(options, words):
    kwargs = {"role_arn": ROLE, **options}
    with pytest.raises(UsageError, match=words):
        plan(DeployOptions(**kwargs), account=ACCOUNT, creator="c", region="us-east-1", now=NOW)


def test_role_arn_from_the_environment_and_missing():
    spec = plan(DeployOptions(), account=ACCOUNT, creator="c", region="us-east-1", role_arn_env=ROLE)
    assert spec.role_arn == ROLE
    with pytest.raises(UsageError, match="SAGEMAKER_EXECUTION_ROLE_ARN"):
        plan(DeployOptions(), account=ACCOUNT, creator="c", region="us-east-1")


def test_model_files_from_s3_for_networks_without_internet():
    spec = make_spec(model_s3_uri=["s3://models-bucket/hf", "video=s3://other/wan/"])
    voice = spec.endpoint("voice")
    assert voice.model_data_uri == "s3://models-bucket/hf/Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice/"
    assert voice.environment["SM_VLLM_MODEL"] == "/opt/ml/model"
    assert voice.environment["SM_VLLM_SERVED_MODEL_NAME"] == "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"
    assert voice.environment["HF_HUB_OFFLINE"] == "1"
    assert spec.endpoint("video").model_data_uri == "s3://other/wan/"
    req = spec.create_model_request(voice)
    validate("CreateModel", req)
    assert req["PrimaryContainer"]["ModelDataSource"]["S3DataSource"]["S3Uri"] == voice.model_data_uri
    variant = spec.create_endpoint_config_request(voice)["ProductionVariants"][0]
    assert variant["ModelDataDownloadTimeoutInSeconds"] == 3600


def test_subset_without_video_needs_no_bucket():
    spec = make_spec(roles=["voice", "image"])
    assert spec.bucket is None and spec.roles == ("voice", "image")


def test_tags_parse():
    assert parse_tags(["a=1,b=two words", "c=x:y/z"]) == {"a": "1", "b": "two words", "c": "x:y/z"}


# ---------------------------------------------------------------------------------------------------------
def test_state_round_trip_and_atomic_write(tmp_path: Path):
    path = tmp_path / "nested" / "state.json"
    spec = make_spec()
    state = DeploymentState.new(spec, path)
    state.save()
    assert not [p for p in path.parent.iterdir() if p.name != "state.json"]  # no temporary file left
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    loaded = DeploymentState.load(path)
    assert loaded.spec == spec
    assert {r: rec.endpoint.name for r, rec in loaded.endpoints.items()} == {e.role: e.endpoint_name for e in spec.endpoints}
    assert all(rec.model.status == "planned" for rec in loaded.endpoints.values())
    data = json.loads(path.read_text())
    assert data["region"] == "us-east-1" and data["bucket"] == spec.bucket
    settings = loaded.studio_settings()
    assert settings["voice_endpoint"] == spec.endpoint("voice").endpoint_name and settings["backend"] == "sagemaker"


def test_state_saves_from_threads_never_tear(tmp_path: Path):
    path = tmp_path / "state.json"
    state = DeploymentState.new(make_spec(), path)
    errors: list[Exception] = []

    def writer(role: str) -> None:
        for i in range(30):
            with state.lock:
                state.endpoints[role].endpoint_status = f"Creating-{i}"
            state.save()

    def reader() -> None:
        for _ in range(60):
            try:
                DeploymentState.load(path)
            except Exception as exc:  # a torn file would fail to parse
                errors.append(exc)

    state.save()
    threads = [threading.Thread(target=writer, args=(r,)) for r in ("voice", "image", "video")]
    threads.append(threading.Thread(target=reader))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert {rec.endpoint_status for rec in DeploymentState.load(path).endpoints.values()} == {"Creating-29"}


def test_damaged_or_missing_state_is_named(tmp_path: Path):
    with pytest.raises(StateError, match="no state file"):
        DeploymentState.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"format": "something-else"}')
    with pytest.raises(StateError, match="damaged"):
        DeploymentState.load(bad)


def test_state_file_never_holds_credentials(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "very-secret-value-123")
    state = DeploymentState.new(make_spec(), tmp_path / "s.json")
    state.save()
    text = (tmp_path / "s.json").read_text()
    assert "very-secret-value-123" not in text and "secret" not in text.lower() and "token" not in text.lower()


# ---------------------------------------------------------------------------------------------------------
def pools(**kw: tuple[str, ...]) -> dict:
    return {role: InstancePool(types) for role, types in kw.items()}


def test_needed_counts_every_entry_with_fallbacks():
    p = pools(voice=PUBLISHED_POOL, image=LARGE_GPU_POOL, video=LARGE_GPU_POOL)
    # All three prefer g6; g6e/g5/g4dn are fall-backs that need one free slot each.
    assert needed_counts(p) == {"ml.g6.xlarge": 3, "ml.g6e.xlarge": 1, "ml.g5.xlarge": 1, "ml.g4dn.xlarge": 1}
    # Fall-back of one endpoint and first choice of another: both counted.
    assert needed_counts(pools(voice=("ml.g6.xlarge", "ml.g5.xlarge"), image=("ml.g5.xlarge",))) == {
        "ml.g6.xlarge": 1, "ml.g5.xlarge": 2}


def test_quota_shortfall_lists_entries_and_suggests_pools_that_fit():
    p = pools(voice=PUBLISHED_POOL, image=LARGE_GPU_POOL, video=LARGE_GPU_POOL)
    quotas = {"ml.g6.xlarge": 0, "ml.g6e.xlarge": 2, "ml.g5.xlarge": 4, "ml.g4dn.xlarge": 1}
    report = evaluate("us-east-1", p, quotas, in_use={"ml.g5.xlarge": 1})
    assert not report.ok
    assert [line.instance_type for line in report.short] == ["ml.g6.xlarge"]
    assert report.suggestion is not None
    # The suggestion itself must pass.
    again = evaluate("us-east-1", report.suggestion, quotas, in_use={"ml.g5.xlarge": 1})
    assert again.ok
    flags = report.suggested_flags()
    assert flags is not None and "ml.g6.xlarge" not in flags
    message = report.message()
    assert "nothing was created" in message and "ml.g6.xlarge: quota 0" in message and flags in message


def test_quota_unknown_type_and_no_subset_fits():
    p = pools(voice=("ml.g6.xlarge",))
    report = evaluate("eu-west-9", p, {"ml.g6.xlarge": None}, {})
    assert not report.ok and report.suggestion is None
    assert "no quota in this region" in report.message() and "no narrower pool" in report.message()


def test_quota_ok():
    p = pools(voice=PUBLISHED_POOL, image=LARGE_GPU_POOL, video=LARGE_GPU_POOL)
    report = evaluate("us-east-1", p, dict.fromkeys(PUBLISHED_POOL, 4.0), {})
    assert report.ok and report.suggestion is None


# ---------------------------------------------------------------------------------------------------------
def test_shipped_price_table_is_dated_and_sourced():
    table = load_prices()
    assert table.source and table.as_of <= date.today() and table.currency == "USD"
    for itype in PUBLISHED_POOL:
        assert table.hourly(itype, "us-east-1").known
    g5 = table.hourly("ml.g5.xlarge", "us-east-1")
    assert g5.usd_per_hour == pytest.approx(1.408) and g5.basis == "table"
    assert table.hourly("ml.g5.xlarge", "ap-southeast-2").basis == "reference region"
    assert not table.hourly("ml.p5.48xlarge", "us-east-1").known
    assert cost_so_far(1.2, 1800) == pytest.approx(0.6)


def test_price_list_documents_pick_the_hosting_rate():
    def product(usage: str, usd: str) -> str:
        return json.dumps({"product": {"attributes": {"usagetype": usage, "instanceName": "ml.g6.xlarge"}},
                           "terms": {"OnDemand": {"T1": {"priceDimensions": {"D1": {"pricePerUnit": {"USD": usd}}}}}}})

    docs = [product("USE1-Train:ml.g6.xlarge", "1.0"), product("USE1-Host:ml.g6.xlarge", "1.2000000000")]
    assert price_from_products(docs, "ml.g6.xlarge") == pytest.approx(1.2)
    assert price_from_products(docs[:1], "ml.g6.xlarge") is None


def test_merged_price_table_keeps_what_the_refresh_did_not_cover():
    shipped = load_prices()
    fresh = PriceTable("api", date(2026, 12, 1), "USD", {"us-east-1": {"ml.g6.xlarge": 1.5}})
    merged = shipped.merged(fresh)
    assert merged.hourly("ml.g6.xlarge", "us-east-1").usd_per_hour == 1.5
    assert merged.hourly("ml.g5.xlarge", "us-east-1").usd_per_hour == pytest.approx(1.408)
    assert merged.as_of == date(2026, 12, 1)


# ---------------------------------------------------------------------------------------------------------
def client_error(code: str, message: str = "boom"):
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": message}}, "CreateEndpoint")


@pytest.mark.parametrize("exc, kind, words", [
    (client_error("ExpiredTokenException"), "CredentialsError",
     "credentials expired; refresh them and run `python -m infra resume`"),
    (client_error("ExpiredToken"), "CredentialsError", "credentials expired"),
    (client_error("UnrecognizedClientException"), "CredentialsError", "rejected the credentials"),
    (client_error("AccessDeniedException", "not allowed: sagemaker:CreateEndpoint"), "AccessDenied",
     "sagemaker:CreateEndpoint"),
    (client_error("ResourceLimitExceeded", "limit 'ml.g5.xlarge for endpoint usage' is 0"), "AwsCallFailed",
     "Service Quotas"),
    (client_error("ValidationException", "bad thing"), "AwsCallFailed", "ValidationException: bad thing"),
])
def test_aws_errors_become_messages_that_name_the_fix(exc, kind, words):
    from infra.aws import translate

    err = translate(exc, "create the voice endpoint", resumable=True)
    assert type(err).__name__ == kind and words in str(err)


def test_no_credentials_message():
    from botocore.exceptions import NoCredentialsError

    from infra.aws import translate

    err = translate(NoCredentialsError(), "check the credentials")
    assert "no usable AWS credentials" in str(err) and "run the command again" in str(err) and err.exit_code == 3


def test_deploy_command_reproduces_the_options():
    from infra.cli import build_parser
    from infra.model import deploy_command

    opts = DeployOptions(roles=["voice", "image"], region="eu-west-1", role_arn=ROLE,
                         instance_types=["ml.g5.xlarge", "voice=ml.g6.xlarge"], tags=["owner=Ana Lima"])
    line = deploy_command(opts, state_file="my state.json")
    assert line.startswith("python -m infra deploy voice image --region eu-west-1")
    import shlex

    args = build_parser().parse_args(shlex.split(line)[3:])
    assert args.roles == ["voice", "image"] and args.instance_types == ["ml.g5.xlarge", "voice=ml.g6.xlarge"]
    assert args.tags == ["owner=Ana Lima"] and str(args.state_file) == "my state.json" and args.role_arn == ROLE
    assert deploy_command(DeployOptions()) == "python -m infra deploy"


def test_deletion_plan_names_every_resource(tmp_path: Path):
    from infra.delete import deletion_plan

    state = DeploymentState.new(make_spec(roles=["voice", "video"]), tmp_path / "s.json")
    plan_ = deletion_plan(state)
    assert [(r, k) for r, k, _ in plan_] == [("voice", "endpoint"), ("voice", "endpoint config"), ("voice", "model"),
                                             ("video", "endpoint"), ("video", "endpoint config"), ("video", "model")]
    assert len(deletion_plan(state, ["video"])) == 3


# -- the voice endpoint's model ---------------------------------------------------------------------------
VOICE_BASE = "Qwen/Qwen3-TTS-12Hz-0.6B-Base"


def test_voice_model_is_the_published_one_unless_chosen():
    from infra.model import DEFAULT_VOICE_MODEL, ROLE_PROFILES
    from protocol.speech import VOICE_MODELS

    assert make_spec().voice_model == DEFAULT_VOICE_MODEL == ROLE_PROFILES["voice"].model_id
    assert DEFAULT_VOICE_MODEL in VOICE_MODELS
    for model_id in VOICE_MODELS:
        spec = make_spec(voice_model=model_id)
        voice = spec.endpoint("voice")
        assert spec.voice_model == voice.model_id == voice.environment["SM_VLLM_MODEL"] == model_id
        validate("CreateModel", spec.create_model_request(voice))
        assert spec.create_model_request(voice)["PrimaryContainer"]["Environment"]["SM_VLLM_MODEL"] == model_id
        # the other endpoints keep their models
        assert spec.endpoint("image").model_id == "black-forest-labs/FLUX.2-klein-4B"
    # typed in another case: the model's own spelling goes to SageMaker
    assert make_spec(voice_model=" qwen/qwen3-tts-12hz-1.7b-voicedesign ").voice_model == \
        "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign"
    assert make_spec(roles=["image"]).voice_model is None


def test_voice_model_files_from_s3_are_the_chosen_models():
    voice = make_spec(voice_model=VOICE_BASE, model_s3_uri=["s3://models-bucket/hf"]).endpoint("voice")
    assert voice.model_data_uri == f"s3://models-bucket/hf/{VOICE_BASE}/"
    assert voice.environment["SM_VLLM_MODEL"] == "/opt/ml/model"
    assert voice.environment["SM_VLLM_SERVED_MODEL_NAME"] == VOICE_BASE
    from protocol.sagemaker import model_id_of_container

    assert model_id_of_container(voice.environment) == VOICE_BASE  # what a reader of DescribeModel gets
    assert model_id_of_container({"SM_VLLM_MODEL": VOICE_BASE}) == VOICE_BASE
    assert model_id_of_container(None) is None


def test_unknown_voice_model_lists_the_known_ones_with_their_task_types():
    from protocol.speech import VOICE_MODELS

    with pytest.raises(UsageError) as info:
        make_spec(voice_model="Qwen/Qwen3-TTS-12Hz-1.7B-Bse")
    text = str(info.value)
    assert "--voice-model 'Qwen/Qwen3-TTS-12Hz-1.7B-Bse' is not a voice model" in text
    assert "did you mean Qwen/Qwen3-TTS-12Hz-1.7B-Base?" in text
    for model_id, task_types in VOICE_MODELS.items():
        line = next(x for x in text.splitlines() if x.strip().startswith(model_id + ":"))
        assert all(t in line for t in task_types), line
    assert "Base (cloning a voice" in text and "VoiceDesign (a voice designed from a description)" in text
    assert "[default]" in next(x for x in text.splitlines() if "1.7B-CustomVoice" in x)
    with pytest.raises(UsageError, match="does not include voice"):
        make_spec(roles=["image"], voice_model=VOICE_BASE)
    with pytest.raises(UsageError, match="not a voice model"):
        make_spec(voice_model="")


def test_unknown_voice_model_on_the_command_line_is_exit_2_before_anything(tmp_path: Path,
                                                                            capsys: pytest.CaptureFixture[str]):
    from infra.cli import main

    state = tmp_path / "state.json"
    code = main(["deploy", "--voice-model", "Qwen/Qwen3-TTS-12Hz-0.6B-VoiceDesign", "--role-arn", ROLE,
                 "--state-file", str(state), "--no-smoke"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "'Qwen/Qwen3-TTS-12Hz-0.6B-VoiceDesign' is not a voice model" in err
    assert "Qwen/Qwen3-TTS-12Hz-1.7B-VoiceDesign: VoiceDesign" in err  # the one that exists is offered
    assert not state.exists()


def test_deploy_command_names_a_voice_model_that_is_not_the_default():
    import shlex

    from infra.cli import build_parser
    from infra.model import DEFAULT_VOICE_MODEL, deploy_command

    line = deploy_command(DeployOptions(voice_model=VOICE_BASE))
    assert line == f"python -m infra deploy --voice-model {VOICE_BASE}"
    assert build_parser().parse_args(shlex.split(line)[3:]).voice_model == VOICE_BASE
    assert deploy_command(DeployOptions(voice_model=DEFAULT_VOICE_MODEL)) == "python -m infra deploy"


def test_the_smoke_test_asks_for_the_task_type_the_voice_model_serves():
    import base64
    import io
    import wave

    import numpy as np

    from services.smoke.voice import SMOKE_VOICE_DESCRIPTION, _voice_config, smoke_reference_wav

    assert _voice_config(None) == ({}, "")
    assert _voice_config("CustomVoice")[0] == {"task_type": "CustomVoice"}
    assert _voice_config("VoiceDesign")[0] == {"task_type": "VoiceDesign", "instructions": SMOKE_VOICE_DESCRIPTION}
    base, label = _voice_config("Base")
    assert base["task_type"] == "Base" and base["x_vector_only_mode"] is True and "synthetic" in label
    assert base["ref_audio"].startswith("data:audio/wav;base64,")
    wav = base64.b64decode(base["ref_audio"].split(",", 1)[1])
    assert wav == smoke_reference_wav()
    with wave.open(io.BytesIO(wav)) as w:
        assert (w.getnchannels(), w.getframerate(), w.getsampwidth()) == (1, 24000, 2)
        samples = np.frombuffer(w.readframes(w.getnframes()), "<i2") / 32768
        assert w.getnframes() / w.getframerate() == 4.0  # inside the 3–30 s a reference may last
    rms_db = 20 * np.log10(np.sqrt(np.mean(samples ** 2)))
    assert -7 < 20 * np.log10(np.abs(samples).max()) < -5 and rms_db > -30  # voiced, not silent, not clipped


# -- GPU memory (protocol/instances.py): a pool entry that cannot hold the model is refused -------------------
def test_a_pool_entry_too_small_for_the_model_is_refused_naming_both_numbers_and_what_fits():
    # FLUX.2-klein-4B: 16.0 GB of bf16 weights → 16.0 × 1.2 + 1 = 20.2 GB; a T4 has 16 GB, vLLM uses 0.9 of it.
    with pytest.raises(UsageError) as err:
        make_spec(instance_types=["image=ml.g5.xlarge,ml.g4dn.xlarge"])
    text = str(err.value)
    assert "needs ≈ 20.2 GB" in text and "ml.g4dn.xlarge has 1× T4 16 GB, of which vLLM uses 14.4 GB" in text
    assert "Instance types that fit: ml.g5.xlarge, ml.g6.xlarge, ml.g6e.xlarge" in text
    assert "--instance-types image=" in text
    # The voice model fits a T4 (5.1 GB); a whole-deployment pool with g4dn refuses image and video only.
    assert make_spec(roles=["voice"], instance_types=["ml.g4dn.xlarge"]).endpoints[0].pool.types == ("ml.g4dn.xlarge",)
    with pytest.raises(UsageError, match="the image endpoint's pool"):
        make_spec(instance_types=["ml.g4dn.xlarge"])


def test_a_model_of_another_family_is_refused_and_an_unknown_one_deploys_with_a_warning():
    from infra.planning import plan_warnings

    with pytest.raises(UsageError, match="is a video model; the image endpoint serves image models"):
        make_spec(models=["image=Wan-AI/Wan2.1-VACE-1.3B-diffusers"])
    with pytest.raises(UsageError, match="must name its endpoint"):
        make_spec(models=["acme/new-model"])
    with pytest.raises(UsageError, match="both choose the voice model"):
        make_spec(models=["voice=acme/tts"], voice_model="Qwen/Qwen3-TTS-12Hz-0.6B-Base")
    spec = make_spec(models=["image=acme/new-image-model"], instance_types=["image=ml.g4dn.xlarge"])
    assert spec.endpoint("image").model_id == "acme/new-image-model"
    assert spec.endpoint("image").environment["SM_VLLM_MODEL"] == "acme/new-image-model"
    (warning,) = plan_warnings(spec)
    assert "acme/new-image-model is not in the studio's catalog" in warning and "deploying anyway" in warning
    assert plan_warnings(make_spec()) == []
    # A known model is spelled as the catalog spells it, and the deploy line carries it.
    from infra.model import deploy_command

    spec = make_spec(roles=["voice"], models=["voice=qwen/qwen3-tts-12hz-0.6b-base"])
    assert spec.voice_model == "Qwen/Qwen3-TTS-12Hz-0.6B-Base"
    line = deploy_command(DeployOptions(roles=["voice"], models=["voice=Qwen/Qwen3-TTS-12Hz-0.6B-Base"]))
    assert line == "python -m infra deploy voice --model voice=Qwen/Qwen3-TTS-12Hz-0.6B-Base"


def test_gpu_fit_line_for_plan_status_and_the_endpoints_page():
    from infra.planning import gpu_fit_line

    assert gpu_fit_line("Wan-AI/Wan2.1-VACE-1.3B-diffusers").startswith("needs ≈ 18.2 GB; fits on ml.g5.xlarge")
    assert gpu_fit_line("acme/x") == "GPU memory unknown: acme/x is not in the studio's catalog"


def test_plan_and_deploy_on_the_command_line_refuse_an_entry_too_small_before_anything(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]):
    from infra.cli import main

    state = tmp_path / "state.json"
    code = main(["deploy", "image", "--instance-types", "image=ml.g4dn.xlarge", "--role-arn", ROLE,
                 "--state-file", str(state), "--no-smoke"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err and not state.exists()
    assert "needs ≈ 20.2 GB" in err and "1× T4 16 GB" in err and "Instance types that fit: ml.g5.xlarge" in err
    code = main(["plan", "video", "--regions", "us-east-1", "--instance-types", "ml.g4dn.xlarge,ml.g6.xlarge"])
    err = capsys.readouterr().err
    assert code == 2 and "Wan-AI/Wan2.1-VACE-1.3B-diffusers needs ≈ 18.2 GB" in err
    code = main(["deploy", "--model", "video=black-forest-labs/FLUX.2-klein-4B", "--role-arn", ROLE,
                 "--state-file", str(state), "--no-smoke"])
    assert code == 2 and "is an image model; the video endpoint" in capsys.readouterr().err and not state.exists()


def test_a_ctrl_c_that_surfaces_as_an_aws_error_still_ends_as_an_interruption(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    """botocore's CRT signer turns a Ctrl-C that lands inside a request into AwsCrtError; the CLI said exit 1."""
    import os
    import signal

    import infra.cli.inspect
    from infra.cli import main
    from infra.errors import AwsCallFailed

    def status_interrupted_mid_request(args) -> int:  # noqa: ANN001
        try:
            os.kill(os.getpid(), signal.SIGINT)
            signal.pthread_kill(threading.main_thread().ident, 0)  # let the handler run here
        except KeyboardInterrupt:
            raise AwsCallFailed("describe endpoint: AWS_ERROR_UNKNOWN") from None
        return 0

    monkeypatch.setattr(infra.cli.inspect, "cmd_status", status_interrupted_mid_request)
    assert main(["status"]) == 130
    err = capsys.readouterr().err
    assert "interrupted:" in err and "AWS_ERROR_UNKNOWN" not in err
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # put back as it was
