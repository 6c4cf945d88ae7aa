"""The emulator's control plane through real boto3 clients: SageMaker, Service Quotas and STS.

Instance pools, status progression with boto3's own waiters, capacity and failure faults, quota checks
of every pool entry, expiring credentials, validation against botocore's service model, tags, paging.
"""

from __future__ import annotations

import time
from typing import Any

import boto3
import httpx
import pytest
from botocore.exceptions import ClientError, WaiterError

from emulator.config import ConfigFileError, load_config

pytest.register_assert_rewrite("tests.emulator_support")  # its helpers assert; rewrite them too
from tests.emulator_support import (
    BIDI_AMI,
    DEFAULT_POOL,
    IMAGE_URI,
    ROLE_ARN,
    EmulatorHandle,
    deploy_endpoint,
)

# One registration of the emulator fixtures for the whole session (one emulator, one moto for all files).
pytest_plugins = ["tests.emulator_support"]

FAST = {"Delay": 0.1, "MaxAttempts": 100}
HOLD = {"create_s": 3600, "update_s": 3600, "delete_s": 3600}  # transitions wait until released
RELEASE = {"create_s": 0, "update_s": 0, "delete_s": 0}


def error_of(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    err = exc.value.response["Error"]
    return err["Code"], err["Message"]


def pool_variant(model: str, types: list[str], **extra: Any) -> dict[str, Any]:
    return {
        "VariantName": "AllTraffic",
        "ModelName": model,
        "InitialInstanceCount": 1,
        "InstancePools": [{"InstanceType": t, "Priority": i} for i, t in enumerate(types, start=1)],
        "InferenceAmiVersion": BIDI_AMI,
        **extra,
    }


def make_model(sm: Any, name: str) -> None:
    sm.create_model(
        ModelName=name,
        ExecutionRoleArn=ROLE_ARN,
        PrimaryContainer={"Image": IMAGE_URI, "Environment": {"SM_VLLM_MODEL": "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice"}},
    )


def pools_in_use(described: dict[str, Any]) -> dict[str, int]:
    return {p["InstanceType"]: p["CurrentInstanceCount"] for p in described["ProductionVariants"][0]["InstancePools"]}


def test_pool_endpoint_goes_creating_to_in_service_and_reports_the_type_used(emulator: EmulatorHandle) -> None:
    emulator.configure(delays=HOLD)
    sm = emulator.client("sagemaker")
    make_model(sm, "voice-model")
    sm.create_endpoint_config(
        EndpointConfigName="voice-config",
        ProductionVariants=[pool_variant("voice-model", DEFAULT_POOL, VariantInstanceProvisionTimeoutInSeconds=900,
                                         ContainerStartupHealthCheckTimeoutInSeconds=1800)],
    )
    config = sm.describe_endpoint_config(EndpointConfigName="voice-config")
    variant = config["ProductionVariants"][0]
    assert "InstanceType" not in variant and variant["InferenceAmiVersion"] == BIDI_AMI
    assert [p["InstanceType"] for p in variant["InstancePools"]] == DEFAULT_POOL

    arn = sm.create_endpoint(EndpointName="voice", EndpointConfigName="voice-config")["EndpointArn"]
    assert arn == f"arn:aws:sagemaker:us-east-1:{emulator.account_id}:endpoint/voice"
    creating = sm.describe_endpoint(EndpointName="voice")
    assert creating["EndpointStatus"] == "Creating"
    assert creating["ProductionVariants"][0]["CurrentInstanceCount"] == 0
    assert creating["ProductionVariants"][0]["VariantStatus"][0]["Status"] == "Creating"

    emulator.configure(delays=RELEASE)
    sm.get_waiter("endpoint_in_service").wait(EndpointName="voice", WaiterConfig=FAST)
    ready = sm.describe_endpoint(EndpointName="voice")
    assert ready["EndpointStatus"] == "InService" and "FailureReason" not in ready
    assert ready["LastModifiedTime"] > ready["CreationTime"]
    assert pools_in_use(ready) == {"ml.g6.xlarge": 1, "ml.g6e.xlarge": 0, "ml.g5.xlarge": 0, "ml.g4dn.xlarge": 0}
    summary = ready["ProductionVariants"][0]
    assert summary["CurrentInstanceCount"] == summary["DesiredInstanceCount"] == 1
    assert summary["DeployedImages"][0]["SpecifiedImage"] == IMAGE_URI
    listed = sm.list_endpoints()["Endpoints"]
    assert [(e["EndpointName"], e["EndpointStatus"]) for e in listed] == [("voice", "InService")]


def test_capacity_fault_moves_to_the_next_priority(emulator: EmulatorHandle) -> None:
    emulator.set_faults(capacity_unavailable=["ml.g6.xlarge", "ml.g6e.xlarge"])
    emulator.configure(delays=HOLD)
    deploy_endpoint(emulator, "fallback", wait=False)
    sm = emulator.client("sagemaker")
    message = sm.describe_endpoint(EndpointName="fallback")["ProductionVariants"][0]["VariantStatus"][0]["StatusMessage"]
    assert "ml.g5.xlarge (pool priority 3)" in message and "no capacity for ml.g6.xlarge (priority 1)" in message
    emulator.configure(delays=RELEASE)
    sm.get_waiter("endpoint_in_service").wait(EndpointName="fallback", WaiterConfig=FAST)
    assert pools_in_use(sm.describe_endpoint(EndpointName="fallback"))["ml.g5.xlarge"] == 1


def test_no_capacity_anywhere_and_injected_failures_end_failed_with_a_reason(emulator: EmulatorHandle) -> None:
    sm = emulator.client("sagemaker")
    emulator.set_faults(capacity_unavailable=["ml.g6.xlarge", "ml.g5.xlarge"], fail_endpoints={"broken": "CUDA driver 12.2 is too old for this image"})
    deploy_endpoint(emulator, "starved", instance_types=["ml.g6.xlarge", "ml.g5.xlarge"], wait=False)
    deploy_endpoint(emulator, "broken", instance_types=["ml.g6e.xlarge"], wait=False)
    for name in ("starved", "broken"):
        with pytest.raises(WaiterError):  # the waiter stops at Failed
            sm.get_waiter("endpoint_in_service").wait(EndpointName=name, WaiterConfig=FAST)
    starved = sm.describe_endpoint(EndpointName="starved")
    assert starved["EndpointStatus"] == "Failed"
    assert "InsufficientInstanceCapacity" in starved["FailureReason"] and "ml.g5.xlarge" in starved["FailureReason"]
    broken = sm.describe_endpoint(EndpointName="broken")
    assert (broken["EndpointStatus"], broken["FailureReason"]) == ("Failed", "CUDA driver 12.2 is too old for this image")
    # a Failed endpoint holds no instances and can be deleted
    assert emulator.state()["usage"] == {}
    sm.delete_endpoint(EndpointName="broken")
    sm.get_waiter("endpoint_deleted").wait(EndpointName="broken", WaiterConfig=FAST)


def test_quota_zero_on_one_pool_entry_refuses_and_creates_nothing(emulator: EmulatorHandle) -> None:
    emulator.configure(quotas={"ml.g5.xlarge": 0})
    sq = emulator.client("service-quotas")
    quotas = sq.get_paginator("list_service_quotas").paginate(ServiceCode="sagemaker").build_full_result()["Quotas"]
    by_name = {q["QuotaName"]: q for q in quotas}
    g5 = by_name["ml.g5.xlarge for endpoint usage"]
    assert g5["Value"] == 0.0 and by_name["ml.g6.xlarge for endpoint usage"]["Value"] == 4.0
    assert sq.get_service_quota(ServiceCode="sagemaker", QuotaCode=g5["QuotaCode"])["Quota"]["QuotaName"] == g5["QuotaName"]
    assert len(quotas) > 100  # every instance type botocore knows, across pages

    sm = emulator.client("sagemaker")
    make_model(sm, "q-model")
    sm.create_endpoint_config(EndpointConfigName="q-config", ProductionVariants=[pool_variant("q-model", DEFAULT_POOL)])
    with pytest.raises(ClientError) as info:
        sm.create_endpoint(EndpointName="q", EndpointConfigName="q-config")
    code, message = error_of(info)
    assert code == "ResourceLimitExceeded"
    assert "'ml.g5.xlarge for endpoint usage' is 0 Instances" in message
    assert sm.list_endpoints()["Endpoints"] == []
    with pytest.raises(ClientError):
        sm.describe_endpoint(EndpointName="q")


def test_quota_counts_instances_other_endpoints_hold(emulator: EmulatorHandle) -> None:
    emulator.configure(quotas={"ml.g6.xlarge": 1})
    deploy_endpoint(emulator, "first", instance_types=["ml.g6.xlarge", "ml.g6e.xlarge"])
    with pytest.raises(ClientError) as info:  # g6e has room, but every entry is checked
        deploy_endpoint(emulator, "second", instance_types=["ml.g6e.xlarge", "ml.g6.xlarge"])
    code, message = error_of(info)
    assert code == "ResourceLimitExceeded"
    assert "'ml.g6.xlarge for endpoint usage' is 1 Instances, with current utilization of 1 Instances" in message
    assert emulator.state()["endpoints"] == {"first": "InService"}


def test_requests_are_validated_against_the_service_model(emulator: EmulatorHandle) -> None:
    sm = emulator.client("sagemaker")
    make_model(sm, "v-model")

    def refused(**variant_extra: Any) -> str:
        variant = {**pool_variant("v-model", DEFAULT_POOL), **variant_extra}
        with pytest.raises(ClientError) as info:
            sm.create_endpoint_config(EndpointConfigName="v-config", ProductionVariants=[variant])
        code, message = error_of(info)
        assert code == "ValidationException"
        return message

    assert "Member must satisfy enum value set" in refused(InstancePools=[{"InstanceType": "ml.g99.xlarge", "Priority": 1}])
    assert "'productionVariants.1.member.instancePools.1.member.priority'" in refused(
        InstancePools=[{"InstanceType": "ml.g6.xlarge", "Priority": 6}]
    )
    six = [{"InstanceType": t, "Priority": 1} for t in ["ml.g6.xlarge", "ml.g6e.xlarge", "ml.g5.xlarge", "ml.g4dn.xlarge", "ml.g5.2xlarge", "ml.g6.2xlarge"]]
    assert "Member must have length less than or equal to 5" in refused(InstancePools=six)
    assert "less than or equal to 3600" in refused(VariantInstanceProvisionTimeoutInSeconds=4000)  # boto3 checks only minimums
    assert "inferenceAmiVersion" in refused(InferenceAmiVersion="al2023-ami-sagemaker-inference-gpu-9")
    assert "either InstanceType or InstancePools" in refused(InstanceType="ml.g6.xlarge")
    assert "priorities must be unique" in refused(
        InstancePools=[{"InstanceType": "ml.g6.xlarge", "Priority": 1}, {"InstanceType": "ml.g5.xlarge", "Priority": 1}]
    )
    assert 'Could not find model "arn:aws:sagemaker:us-east-1:123456789012:model/absent"' in refused(ModelName="absent")
    assert sm.list_endpoint_configs()["EndpointConfigs"] == []


def test_missing_and_duplicate_resources_are_sagemaker_errors(emulator: EmulatorHandle) -> None:
    sm = emulator.client("sagemaker")
    for call, kwargs, text in [
        (sm.describe_model, {"ModelName": "nope"}, 'Could not find model "arn:aws:sagemaker:us-east-1:123456789012:model/nope".'),
        (sm.describe_endpoint_config, {"EndpointConfigName": "nope"}, 'Could not find endpoint configuration "arn:aws:sagemaker:us-east-1:123456789012:endpoint-config/nope".'),
        (sm.describe_endpoint, {"EndpointName": "nope"}, 'Could not find endpoint "arn:aws:sagemaker:us-east-1:123456789012:endpoint/nope".'),
        (sm.delete_endpoint, {"EndpointName": "nope"}, 'Could not find endpoint "arn:aws:sagemaker:us-east-1:123456789012:endpoint/nope".'),
        (sm.create_endpoint, {"EndpointName": "e", "EndpointConfigName": "nope"}, "Could not find endpoint configuration"),
    ]:
        with pytest.raises(ClientError) as info:
            call(**kwargs)
        assert error_of(info)[0] == "ValidationException" and text in error_of(info)[1]
    make_model(sm, "Dup-Model")
    with pytest.raises(ClientError) as info:
        make_model(sm, "dup-model")  # names are unique regardless of case
    assert error_of(info) == ("ValidationException", 'Cannot create already existing model "arn:aws:sagemaker:us-east-1:123456789012:model/dup-model".')


def test_credentials_expire_after_n_calls_and_fresh_ones_work(emulator: EmulatorHandle) -> None:
    emulator.set_faults(expire_credentials_after_calls=3)
    old = emulator.client("sagemaker", access_key_id="AKIAOLDCREDENTIALS01")
    old_sts = emulator.client("sts", access_key_id="AKIAOLDCREDENTIALS01")
    assert old_sts.get_caller_identity()["Account"] == emulator.account_id  # call 1
    make_model(old, "before-expiry")  # call 2
    old.describe_model(ModelName="before-expiry")  # call 3
    with pytest.raises(ClientError) as info:
        old.create_endpoint_config(EndpointConfigName="c", ProductionVariants=[pool_variant("before-expiry", ["ml.g6.xlarge"])])
    assert error_of(info) == ("ExpiredTokenException", "The security token included in the request is expired")
    with pytest.raises(ClientError) as sts_info:
        old_sts.get_caller_identity()
    assert error_of(sts_info)[0] == "ExpiredToken"
    fresh = emulator.client("sagemaker", access_key_id="AKIAFRESHCREDENTIAL1")
    assert fresh.describe_model(ModelName="before-expiry")["ModelName"] == "before-expiry"
    assert emulator.state()["endpoint_configs"] == []


def test_update_endpoint_moves_to_the_new_config(emulator: EmulatorHandle) -> None:
    deploy_endpoint(emulator, "upd", instance_types=["ml.g6.xlarge"])
    sm = emulator.client("sagemaker")
    sm.create_endpoint_config(EndpointConfigName="upd-config-2", ProductionVariants=[pool_variant("upd-model", ["ml.g6e.xlarge", "ml.g5.xlarge"])])
    with pytest.raises(ClientError) as info:
        sm.update_endpoint(EndpointName="upd", EndpointConfigName="absent-config")
    assert "Could not find endpoint configuration" in error_of(info)[1]
    emulator.configure(delays=HOLD)
    sm.update_endpoint(EndpointName="upd", EndpointConfigName="upd-config-2")
    updating = sm.describe_endpoint(EndpointName="upd")
    assert updating["EndpointStatus"] == "Updating"
    assert updating["PendingDeploymentSummary"]["EndpointConfigName"] == "upd-config-2"
    assert pools_in_use(updating) == {"ml.g6.xlarge": 1}  # the old fleet serves meanwhile
    with pytest.raises(ClientError) as busy:
        sm.update_endpoint(EndpointName="upd", EndpointConfigName="upd-config-2")
    assert "in-progress" in error_of(busy)[1]
    emulator.configure(delays=RELEASE)
    sm.get_waiter("endpoint_in_service").wait(EndpointName="upd", WaiterConfig=FAST)
    done = sm.describe_endpoint(EndpointName="upd")
    assert done["EndpointConfigName"] == "upd-config-2"
    assert pools_in_use(done) == {"ml.g6e.xlarge": 1, "ml.g5.xlarge": 0}


def test_delete_waits_until_gone_and_leaves_nothing(emulator: EmulatorHandle) -> None:
    sm = emulator.client("sagemaker")
    emulator.configure(delays=HOLD)
    deploy_endpoint(emulator, "short-lived", wait=False)
    with pytest.raises(ClientError) as info:
        sm.delete_endpoint(EndpointName="short-lived")  # SageMaker refuses while Creating
    assert "in-progress" in error_of(info)[1]
    emulator.configure(delays={"create_s": 0})
    sm.get_waiter("endpoint_in_service").wait(EndpointName="short-lived", WaiterConfig=FAST)
    sm.delete_endpoint(EndpointName="short-lived")
    assert sm.describe_endpoint(EndpointName="short-lived")["EndpointStatus"] == "Deleting"
    emulator.configure(delays=RELEASE)
    sm.get_waiter("endpoint_deleted").wait(EndpointName="short-lived", WaiterConfig=FAST)
    sm.delete_endpoint_config(EndpointConfigName="short-lived-config")
    sm.delete_model(ModelName="short-lived-model")
    assert sm.list_endpoints()["Endpoints"] == []
    assert sm.list_endpoint_configs()["EndpointConfigs"] == []
    assert sm.list_models()["Models"] == []
    with pytest.raises(ClientError) as again:
        sm.delete_model(ModelName="short-lived-model")
    assert "Could not find model" in error_of(again)[1]


def test_tags_on_create_add_list_delete(emulator: EmulatorHandle) -> None:
    tags = [{"Key": "project", "Value": "omni-studio"}, {"Key": "role", "Value": "voice"}]
    described = deploy_endpoint(emulator, "tagged", tags=tags)
    sm = emulator.client("sagemaker")
    arn = described["EndpointArn"]
    assert sm.list_tags(ResourceArn=arn)["Tags"] == tags
    model_arn = sm.describe_model(ModelName="tagged-model")["ModelArn"]
    assert sm.list_tags(ResourceArn=model_arn)["Tags"] == tags
    sm.add_tags(ResourceArn=arn, Tags=[{"Key": "created-by", "Value": "test"}, {"Key": "role", "Value": "speech"}])
    sm.delete_tags(ResourceArn=arn, TagKeys=["project"])
    assert {t["Key"]: t["Value"] for t in sm.list_tags(ResourceArn=arn)["Tags"]} == {"role": "speech", "created-by": "test"}
    with pytest.raises(ClientError) as info:
        sm.list_tags(ResourceArn=arn.replace("/tagged", "/untagged"))
    assert error_of(info)[0] == "ValidationException"


def test_lists_page_sort_and_filter_like_sagemaker(emulator: EmulatorHandle) -> None:
    sm = emulator.client("sagemaker")
    names = [f"page-model-{i:02d}" for i in range(12)]
    for name in names:
        make_model(sm, name)
        time.sleep(0.002)  # distinct creation times
    first = sm.list_models()
    assert len(first["Models"]) == 10 and "NextToken" in first  # SageMaker's default page is 10
    assert first["Models"][0]["ModelName"] == "page-model-11"  # newest first
    everything = sm.get_paginator("list_models").paginate().build_full_result()["Models"]
    assert sorted(m["ModelName"] for m in everything) == names
    by_name = sm.list_models(SortBy="Name", SortOrder="Ascending", NameContains="MODEL-0", MaxResults=3)
    assert [m["ModelName"] for m in by_name["Models"]] == names[:3]


def test_region_and_signature_are_checked(emulator: EmulatorHandle) -> None:
    assert emulator.client("sts").get_caller_identity()["Arn"].startswith(f"arn:aws:iam::{emulator.account_id}:")
    wrong_region = boto3.session.Session().client(
        "sagemaker", endpoint_url=emulator.http_url, region_name="eu-west-1",
        aws_access_key_id="AKIAWRONGREGION00001", aws_secret_access_key="x",
    )
    with pytest.raises(ClientError) as info:
        wrong_region.list_endpoints()
    assert error_of(info)[0] == "InvalidSignatureException" and "us-east-1" in error_of(info)[1]
    unsigned = httpx.post(
        emulator.http_url, headers={"X-Amz-Target": "SageMaker.ListEndpoints", "Content-Type": "application/x-amz-json-1.1"},
        content=b"{}", trust_env=False,
    )
    assert unsigned.status_code == 403 and unsigned.json()["__type"] == "MissingAuthenticationTokenException"


def test_tls_listener_serves_boto3_trusting_the_emulator_ca(emulator: EmulatorHandle) -> None:
    """The path a corporate TLS proxy takes: https endpoints and AWS_CA_BUNDLE (here: verify=ca_file)."""
    sm = boto3.session.Session().client(
        "sagemaker", endpoint_url=emulator.https_url, region_name=emulator.region, verify=str(emulator.ca_file),
        aws_access_key_id=emulator.access_key_id, aws_secret_access_key=emulator.secret_access_key,
    )
    make_model(sm, "over-tls")
    assert emulator.env(tls=True)["AWS_ENDPOINT_URL_SAGEMAKER"] == emulator.https_url
    assert emulator.client("sagemaker").describe_model(ModelName="over-tls")["ModelArn"].endswith(":model/over-tls")


def test_bad_configuration_is_refused_with_a_reason(emulator: EmulatorHandle, tmp_path: Any) -> None:
    refused = httpx.put(f"{emulator.http_url}/_emulator/config", json={"quotas": {"ml.g6.xlarge": -1}}, trust_env=False)
    assert refused.status_code == 400 and "quota values must be >= 0" in refused.json()["error"]
    refused = httpx.post(f"{emulator.http_url}/_emulator/faults", json={"capacity_unavalable": []}, trust_env=False)
    assert refused.status_code == 400 and "capacity_unavalable" in refused.json()["error"]
    bad_file = tmp_path / "faults.json"
    bad_file.write_text('{"delays": {"create_s": "soon"}}')
    with pytest.raises(ConfigFileError) as info:
        load_config(bad_file)
    assert str(bad_file) in str(info.value) and "delays.create_s" in str(info.value)
