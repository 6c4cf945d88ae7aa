"""UpdateEndpoint with versions in the emulator, through real boto3 clients: a plain update (Updating →
InService, the new config and image in DescribeEndpoint), a blue/green update that bakes with both fleets
held, a new version that fails its health check (rolled back by SageMaker), and a broken version whose
errors trip the CloudWatch rollback alarm (kept in moto) during the bake, as does an alarm set by hand."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any

import pytest
from botocore.exceptions import ClientError

from protocol.images import ImageGenerationRequest

if TYPE_CHECKING:
    from tests.emulator_support import EmulatorHandle

pytest_plugins = ["tests.emulator_support"]
ROLE_ARN = "arn:aws:iam::123456789012:role/omni-studio-sagemaker-execution"
IMAGE = "763104351884.dkr.ecr.us-east-1.amazonaws.com/vllm:{tag}"
ROUTE = "route=/v1/images/generations"
WAIT_S = 30.0


def image_body() -> bytes:
    request = ImageGenerationRequest(prompt="a lighthouse at dusk", size="64x64", num_inference_steps=2, seed=7)
    return json.dumps(request.wire()).encode()


def version(sm: Any, endpoint: str, n: int, tag: str) -> str:
    """Model and config `<endpoint>-v<n>` running the image `tag`; returns the config name."""
    name = f"{endpoint}-v{n}"
    sm.create_model(ModelName=name, ExecutionRoleArn=ROLE_ARN,
                    PrimaryContainer={"Image": IMAGE.format(tag=tag), "Environment": {"SM_VLLM_MODEL": "offline"}})
    sm.create_endpoint_config(EndpointConfigName=name, ProductionVariants=[{
        "VariantName": "AllTraffic", "ModelName": name, "InitialInstanceCount": 1, "InstanceType": "ml.g6.xlarge"}])
    return name


def first_version(sm: Any, endpoint: str, tag: str = "v1-good") -> str:
    config = version(sm, endpoint, 1, tag)
    sm.create_endpoint(EndpointName=endpoint, EndpointConfigName=config)
    sm.get_waiter("endpoint_in_service").wait(EndpointName=endpoint, WaiterConfig={"Delay": 0.1, "MaxAttempts": 100})
    return config


def wait_for(sm: Any, endpoint: str, pred: Any) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    while True:
        desc = sm.describe_endpoint(EndpointName=endpoint)
        if pred(desc):
            return desc
        assert time.monotonic() < deadline, f"{endpoint} stuck: {desc['EndpointStatus']}"
        time.sleep(0.05)


def bake_policy(alarms: list[str] | None = None) -> dict[str, Any]:
    cfg: dict[str, Any] = {"BlueGreenUpdatePolicy": {
        "TrafficRoutingConfiguration": {"Type": "ALL_AT_ONCE", "WaitIntervalInSeconds": 300},
        "MaximumExecutionTimeoutInSeconds": 3600}}
    if alarms:
        cfg["AutoRollbackConfiguration"] = {"Alarms": [{"AlarmName": a} for a in alarms]}
    return cfg


def rollback_alarm(emulator: EmulatorHandle, endpoint: str) -> str:
    name = f"{endpoint}-errors"
    emulator.client("cloudwatch").put_metric_alarm(
        AlarmName=name, Namespace="AWS/SageMaker", MetricName="Invocation5XXErrors", Statistic="Sum", Period=60,
        EvaluationPeriods=1, Threshold=1, ComparisonOperator="GreaterThanOrEqualToThreshold",
        Dimensions=[{"Name": "EndpointName", "Value": endpoint}, {"Name": "VariantName", "Value": "AllTraffic"}])
    return name


def test_plain_update_moves_the_endpoint_to_the_new_config_and_image(emulator: EmulatorHandle):
    sm = emulator.client("sagemaker")
    v1 = first_version(sm, "ver-plain")
    v2 = version(sm, "ver-plain", 2, "v2-good")
    sm.update_endpoint(EndpointName="ver-plain", EndpointConfigName=v2)
    updating = sm.describe_endpoint(EndpointName="ver-plain")
    assert updating["EndpointStatus"] == "Updating" and updating["EndpointConfigName"] == v1
    assert updating["PendingDeploymentSummary"]["EndpointConfigName"] == v2
    done = wait_for(sm, "ver-plain", lambda d: d["EndpointStatus"] == "InService")
    assert done["EndpointConfigName"] == v2 and "FailureReason" not in done and "LastDeploymentConfig" not in done
    assert done["ProductionVariants"][0]["DeployedImages"][0]["SpecifiedImage"] == IMAGE.format(tag="v2-good")
    # Back to the first version the same way (the superseded config still exists).
    sm.update_endpoint(EndpointName="ver-plain", EndpointConfigName=v1)
    assert wait_for(sm, "ver-plain", lambda d: d["EndpointStatus"] == "InService")["EndpointConfigName"] == v1


def test_blue_green_update_bakes_with_both_fleets_then_takes_the_new_config(emulator: EmulatorHandle):
    sm = emulator.client("sagemaker")
    v1 = first_version(sm, "ver-bake")
    v2 = version(sm, "ver-bake", 2, "v2-good")
    emulator.configure(delays={"bake_s": 3600})  # held in its bake until released
    policy = bake_policy()
    sm.update_endpoint(EndpointName="ver-bake", EndpointConfigName=v2, DeploymentConfig=policy)
    baking = wait_for(sm, "ver-bake", lambda d: d.get("PendingDeploymentSummary", {}).get("ProductionVariants", [{}])[0]
                      .get("VariantStatus", [{}])[0].get("Status") == "Baking")
    assert baking["EndpointStatus"] == "Updating" and baking["EndpointConfigName"] == v1
    assert baking["LastDeploymentConfig"] == policy
    assert emulator.state()["usage"] == {"ml.g6.xlarge": 2}  # the old fleet is held through the bake
    rt = emulator.client("sagemaker-runtime")
    served = rt.invoke_endpoint(EndpointName="ver-bake", Body=image_body(), ContentType="application/json",
                                CustomAttributes=ROUTE)
    assert served["ContentType"].startswith("application/json")  # the new fleet takes the traffic
    emulator.configure(delays={"bake_s": 0})
    done = wait_for(sm, "ver-bake", lambda d: d["EndpointStatus"] == "InService")
    assert done["EndpointConfigName"] == v2 and "FailureReason" not in done
    assert emulator.state()["usage"] == {"ml.g6.xlarge": 1}


def test_a_new_version_that_fails_its_health_check_is_rolled_back(emulator: EmulatorHandle):
    sm = emulator.client("sagemaker")
    v1 = first_version(sm, "ver-fail")
    v2 = version(sm, "ver-fail", 2, "v2-cuda-mismatch")
    emulator.set_faults(fail_images={"v2-cuda-mismatch": "CUDA driver 535 is too old for this image"})
    sm.update_endpoint(EndpointName="ver-fail", EndpointConfigName=v2, DeploymentConfig=bake_policy())
    done = wait_for(sm, "ver-fail", lambda d: d["EndpointStatus"] != "Updating")
    assert done["EndpointStatus"] == "InService" and done["EndpointConfigName"] == v1
    assert "did not pass the ping health check: CUDA driver 535 is too old" in done["FailureReason"]
    # The same image on a new endpoint: Failed.
    sm.create_endpoint(EndpointName="ver-fail-new", EndpointConfigName=v2)
    failed = wait_for(sm, "ver-fail-new", lambda d: d["EndpointStatus"] != "Creating")
    assert failed["EndpointStatus"] == "Failed" and "CUDA driver 535" in failed["FailureReason"]


def test_errors_of_a_broken_version_trip_the_rollback_alarm_during_the_bake(emulator: EmulatorHandle):
    sm, rt = emulator.client("sagemaker"), emulator.client("sagemaker-runtime")
    v1 = first_version(sm, "ver-broken")
    v2 = version(sm, "ver-broken", 2, "v2-broken")
    alarm = rollback_alarm(emulator, "ver-broken")
    emulator.set_faults(broken_images={"v2-broken": "CUDA error: an illegal memory access was encountered"})
    emulator.configure(delays={"bake_s": 3600})
    sm.update_endpoint(EndpointName="ver-broken", EndpointConfigName=v2, DeploymentConfig=bake_policy([alarm]))
    wait_for(sm, "ver-broken", lambda d: "Baking" in json.dumps(d.get("PendingDeploymentSummary", {}), default=str))
    with pytest.raises(ClientError) as info:
        rt.invoke_endpoint(EndpointName="ver-broken", Body=image_body(), ContentType="application/json",
                           CustomAttributes=ROUTE)
    assert info.value.response["Error"]["Code"] == "ModelError" and info.value.response["OriginalStatusCode"] == 500
    assert "illegal memory access" in info.value.response["OriginalMessage"]
    done = wait_for(sm, "ver-broken", lambda d: d["EndpointStatus"] == "InService")  # long before the bake ends
    assert done["EndpointConfigName"] == v1
    assert f"CloudWatch alarm {alarm} went into ALARM state during the baking period" in done["FailureReason"]
    assert emulator.client("cloudwatch").describe_alarms(AlarmNames=[alarm])["MetricAlarms"][0]["StateValue"] == "ALARM"
    assert emulator.state()["usage"] == {"ml.g6.xlarge": 1}
    served = rt.invoke_endpoint(EndpointName="ver-broken", Body=image_body(), ContentType="application/json",
                                CustomAttributes=ROUTE)  # the old version serves again
    assert served["InvokedProductionVariant"] == "AllTraffic"


def test_an_alarm_set_during_the_bake_rolls_back_and_a_plain_update_to_a_broken_version_stays(
        emulator: EmulatorHandle):
    sm = emulator.client("sagemaker")
    v1 = first_version(sm, "ver-alarm")
    v2 = version(sm, "ver-alarm", 2, "v2-good")
    alarm = rollback_alarm(emulator, "ver-alarm")
    emulator.configure(delays={"bake_s": 3600})
    sm.update_endpoint(EndpointName="ver-alarm", EndpointConfigName=v2, DeploymentConfig=bake_policy([alarm]))
    wait_for(sm, "ver-alarm", lambda d: "Baking" in json.dumps(d.get("PendingDeploymentSummary", {}), default=str))
    emulator.client("cloudwatch").set_alarm_state(AlarmName=alarm, StateValue="ALARM", StateReason="latency")
    done = wait_for(sm, "ver-alarm", lambda d: d["EndpointStatus"] == "InService")
    assert done["EndpointConfigName"] == v1 and alarm in done["FailureReason"]

    # Without a DeploymentConfig nothing watches the new version: a broken one stays, and answers errors.
    v3 = version(sm, "ver-alarm", 3, "v3-broken")
    emulator.set_faults(broken_images={"v3-broken": "segfault"})
    sm.update_endpoint(EndpointName="ver-alarm", EndpointConfigName=v3)
    assert wait_for(sm, "ver-alarm", lambda d: d["EndpointStatus"] == "InService")["EndpointConfigName"] == v3
    with pytest.raises(ClientError) as info:
        emulator.client("sagemaker-runtime").invoke_endpoint(EndpointName="ver-alarm", Body=b"{}",
                                                             ContentType="application/json", CustomAttributes=ROUTE)
    assert json.loads(info.value.response["OriginalMessage"])["error"]["message"] == "segfault"  # vLLM's JSON error body
