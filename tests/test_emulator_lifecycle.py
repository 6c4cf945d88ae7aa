"""The emulator's lifecycle services through real boto3 clients: EventBridge Scheduler, IAM, Application Auto
Scaling (moto behind, its gaps filled), schedules that fire and async endpoints that scale to zero and back —
all on the emulator's clock, which the tests move (POST /_emulator/clock) instead of sleeping.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from botocore.exceptions import ClientError

pytest.register_assert_rewrite("tests.emulator_support")
from tests.emulator_support import EmulatorHandle, deploy_endpoint  # noqa: E402
from tests.test_emulator_runtime import VIDEO_ROUTE, video_multipart, wait_for_object  # noqa: E402

pytest_plugins = ["tests.emulator_support"]

TARGET = "arn:aws:scheduler:::aws-sdk:sagemaker:deleteEndpoint"
TRUST = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "scheduler.amazonaws.com"},
                                                 "Action": "sts:AssumeRole"}]}


def error_of(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, str]:
    return exc.value.response["Error"]["Code"], exc.value.response["Error"]["Message"]


def role(emulator: EmulatorHandle, name: str, resources: list[str], *, trust: dict | None = None,
         deny: list[str] | None = None) -> str:
    iam = emulator.client("iam")
    arn = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust or TRUST))["Role"]["Arn"]
    statements: list[dict[str, Any]] = [{"Effect": "Allow", "Action": "sagemaker:DeleteEndpoint", "Resource": resources}]
    if deny:
        statements.append({"Effect": "Deny", "Action": "sagemaker:*", "Resource": deny})
    iam.put_role_policy(RoleName=name, PolicyName="p", PolicyDocument=json.dumps({"Version": "2012-10-17",
                                                                                   "Statement": statements}))
    return arn


def endpoint_arn(emulator: EmulatorHandle, name: str) -> str:
    return f"arn:aws:sagemaker:{emulator.region}:{emulator.account_id}:endpoint/{name.lower()}"


def at(delta: timedelta) -> str:
    return f"at({(datetime.now(UTC) + delta):%Y-%m-%dT%H:%M:%S})"


def schedule(emulator: EmulatorHandle, name: str, endpoint: str, role_arn: str, when: str, group: str = "g") -> None:
    emulator.client("scheduler").create_schedule(
        Name=name, GroupName=group, ScheduleExpression=when, ScheduleExpressionTimezone="UTC",
        FlexibleTimeWindow={"Mode": "OFF"}, ActionAfterCompletion="DELETE",
        Target={"Arn": TARGET, "RoleArn": role_arn, "Input": json.dumps({"EndpointName": endpoint})})


def gone(emulator: EmulatorHandle, name: str, timeout_s: float = 20.0) -> bool:
    sm = emulator.client("sagemaker")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            sm.describe_endpoint(EndpointName=name)
        except ClientError:
            return True
        time.sleep(0.05)
    return False


# ---------------------------------------------------------------------------------------------------------
def test_scheduler_gaps_moto_leaves_are_filled(emulator: EmulatorHandle) -> None:
    sch = emulator.client("scheduler")
    sch.create_schedule_group(Name="g", Tags=[{"Key": "omni-studio:deployment", "Value": "d1"}])
    with pytest.raises(ClientError) as exc:  # moto replaces the group (and drops its schedules)
        sch.create_schedule_group(Name="g")
    assert error_of(exc)[0] == "ConflictException"
    with pytest.raises(ClientError) as exc:  # moto: a 500 (KeyError)
        sch.delete_schedule_group(Name="nope")
    assert error_of(exc)[0] == "ResourceNotFoundException"
    arn = role(emulator, "sched", ["*"])
    with pytest.raises(ClientError) as exc:  # moto: a 500
        schedule(emulator, "s", "ep", arn, at(timedelta(hours=1)), group="missing")
    assert error_of(exc)[0] == "ResourceNotFoundException"
    with pytest.raises(ClientError) as exc:  # moto takes any text
        schedule(emulator, "s", "ep", arn, "at(tomorrow)")
    assert error_of(exc) == ("ValidationException", "Invalid Schedule Expression at(tomorrow).")
    schedule(emulator, "s", "ep", arn, at(timedelta(hours=1)))
    got = sch.get_schedule(Name="s", GroupName="g")
    assert (got["ActionAfterCompletion"], got["FlexibleTimeWindow"], got["Target"]["Arn"]) == ("DELETE", {"Mode": "OFF"}, TARGET)
    tags = sch.list_tags_for_resource(ResourceArn=sch.get_schedule_group(Name="g")["Arn"])["Tags"]
    assert tags == [{"Key": "omni-studio:deployment", "Value": "d1"}]


def test_iam_simulation_moto_lacks_is_answered(emulator: EmulatorHandle) -> None:
    ours, other = endpoint_arn(emulator, "ours"), endpoint_arn(emulator, "other")
    arn = role(emulator, "sim", [ours, endpoint_arn(emulator, "denied")], deny=[endpoint_arn(emulator, "denied")])
    results = emulator.client("iam").simulate_principal_policy(
        PolicySourceArn=arn, ActionNames=["sagemaker:DeleteEndpoint"],
        ResourceArns=[ours, other, endpoint_arn(emulator, "denied")])["EvaluationResults"]
    assert [(r["EvalResourceName"], r["EvalDecision"]) for r in results] == [
        (ours, "allowed"), (other, "implicitDeny"), (endpoint_arn(emulator, "denied"), "explicitDeny")]
    with pytest.raises(ClientError) as exc:
        emulator.client("iam").simulate_principal_policy(PolicySourceArn=arn.replace("sim", "nobody"),
                                                         ActionNames=["sagemaker:DeleteEndpoint"])
    assert error_of(exc)[0] == "NoSuchEntity"


def test_a_schedule_deletes_its_endpoint_when_the_clock_passes_its_time(emulator: EmulatorHandle) -> None:
    deploy_endpoint(emulator, "ttl-me", instance_type="ml.g5.xlarge")
    deploy_endpoint(emulator, "not-mine", instance_type="ml.g5.xlarge")
    emulator.client("scheduler").create_schedule_group(Name="g")
    good = role(emulator, "may-delete", [endpoint_arn(emulator, "ttl-me")])
    schedule(emulator, "s1", "ttl-me", good, at(timedelta(hours=8)))
    schedule(emulator, "s2", "not-mine", good, at(timedelta(hours=8)))  # the role may not delete this one
    assert emulator.advance_clock(3600)["events"] == []  # an hour later: nothing due
    events = emulator.advance_clock(7 * 3600 + 60)["events"]
    outcomes = {e["schedule"]: e["outcome"] for e in events}
    assert outcomes["g/s1"] == "deleted endpoint ttl-me"
    assert outcomes["g/s2"].startswith("failed: AccessDeniedException") and "sagemaker:DeleteEndpoint" in outcomes["g/s2"]
    assert gone(emulator, "ttl-me")
    assert emulator.client("sagemaker").describe_endpoint(EndpointName="not-mine")["EndpointStatus"] == "InService"
    # ActionAfterCompletion=DELETE: both schedules are gone from the account
    assert emulator.client("scheduler").list_schedules(GroupName="g")["Schedules"] == []


def test_an_endpoint_still_creating_is_deleted_once_it_can_be(emulator: EmulatorHandle) -> None:
    emulator.configure(delays={"create_s": 3600})
    deploy_endpoint(emulator, "slow", instance_type="ml.g5.xlarge", wait=False)
    emulator.client("scheduler").create_schedule_group(Name="g")
    schedule(emulator, "s", "slow", role(emulator, "r", ["*"]), at(timedelta(minutes=5)))
    assert emulator.advance_clock(600)["events"] == []  # Creating: DeleteEndpoint is refused, retried
    assert emulator.lifecycle()["schedules"]["g/s"]["last_error"].startswith("not yet")
    emulator.configure(delays={"create_s": 0})  # InService now: the next try deletes it
    assert gone(emulator, "slow")
    ran = emulator.lifecycle()["invocations"]
    assert [e["outcome"] for e in ran] == ["deleted endpoint slow"] and ran[0]["attempts"] > 1


def test_application_autoscaling_gaps_moto_leaves_are_filled(emulator: EmulatorHandle) -> None:
    aas = emulator.client("application-autoscaling")
    target = {"ServiceNamespace": "sagemaker", "ScalableDimension": "sagemaker:variant:DesiredInstanceCount"}
    with pytest.raises(ClientError) as exc:
        aas.register_scalable_target(**target, ResourceId="endpoint/none/variant/AllTraffic", MinCapacity=0, MaxCapacity=1)
    assert error_of(exc)[0] == "ValidationException"
    deploy_endpoint(emulator, "scaled", instance_type="ml.g5.xlarge")
    rid = "endpoint/scaled/variant/AllTraffic"
    with pytest.raises(ClientError) as exc:  # moto accepts a policy with no target
        aas.put_scaling_policy(**target, ResourceId=rid, PolicyName="p", PolicyType="TargetTrackingScaling",
                               TargetTrackingScalingPolicyConfiguration={"TargetValue": 5.0, "PredefinedMetricSpecification": {
                                   "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"}})
    assert error_of(exc)[0] == "ObjectNotFoundException"
    aas.register_scalable_target(**target, ResourceId=rid, MinCapacity=1, MaxCapacity=3)
    aas.put_scaling_policy(**target, ResourceId=rid, PolicyName="p", PolicyType="TargetTrackingScaling",
                           TargetTrackingScalingPolicyConfiguration={"TargetValue": 5.0, "PredefinedMetricSpecification": {
                               "PredefinedMetricType": "SageMakerVariantInvocationsPerInstance"}})
    aas.deregister_scalable_target(**target, ResourceId=rid)  # moto keeps the policy; AWS deletes it
    assert aas.describe_scaling_policies(ServiceNamespace="sagemaker")["ScalingPolicies"] == []


def scale_to_zero(emulator: EmulatorHandle, name: str) -> None:
    """The pattern AWS documents for async endpoints: min 0, target tracking on the backlog per instance,
    and a step policy driven by an alarm on HasBacklogWithoutCapacity."""
    aas, cw = emulator.client("application-autoscaling"), emulator.client("cloudwatch")
    target = {"ServiceNamespace": "sagemaker", "ResourceId": f"endpoint/{name}/variant/AllTraffic",
              "ScalableDimension": "sagemaker:variant:DesiredInstanceCount"}
    aas.register_scalable_target(**target, MinCapacity=0, MaxCapacity=1)
    aas.put_scaling_policy(**target, PolicyName="backlog", PolicyType="TargetTrackingScaling",
                           TargetTrackingScalingPolicyConfiguration={"TargetValue": 1.0, "CustomizedMetricSpecification": {
                               "MetricName": "ApproximateBacklogSizePerInstance", "Namespace": "AWS/SageMaker",
                               "Dimensions": [{"Name": "EndpointName", "Value": name}], "Statistic": "Average"}})
    step = aas.put_scaling_policy(**target, PolicyName="from-zero", PolicyType="StepScaling",
                                  StepScalingPolicyConfiguration={
                                      "AdjustmentType": "ChangeInCapacity", "MetricAggregationType": "Average",
                                      "Cooldown": 300, "StepAdjustments": [{"MetricIntervalLowerBound": 0, "ScalingAdjustment": 1}]})
    cw.put_metric_alarm(AlarmName=f"{name}-no-capacity", MetricName="HasBacklogWithoutCapacity", Namespace="AWS/SageMaker",
                        Statistic="Average", Period=60, EvaluationPeriods=2, DatapointsToAlarm=2, Threshold=1,
                        ComparisonOperator="GreaterThanOrEqualToThreshold", TreatMissingData="missing",
                        Dimensions=[{"Name": "EndpointName", "Value": name}], AlarmActions=[step["PolicyARN"]])


def counts(emulator: EmulatorHandle, name: str) -> tuple[str, int, int]:
    d = emulator.client("sagemaker").describe_endpoint(EndpointName=name)
    v = d["ProductionVariants"][0]
    return d["EndpointStatus"], v["CurrentInstanceCount"], v["DesiredInstanceCount"]


def test_async_endpoint_scales_to_zero_when_idle_and_a_job_brings_an_instance_back(emulator: EmulatorHandle,
                                                                                    bucket: str) -> None:
    deploy_endpoint(emulator, "vid", async_output=f"s3://{bucket}/out", async_failure=f"s3://{bucket}/fail",
                    instance_types=["ml.g6.xlarge", "ml.g5.xlarge"])
    scale_to_zero(emulator, "vid")
    assert emulator.advance_clock(600)["events"] == []  # 10 idle minutes: not yet (15 by default)
    events = emulator.advance_clock(600)["events"]
    assert [(e["from"], e["to"], e["phase"]) for e in events] == [(1, 0, "started"), (1, 0, "done")]
    assert counts(emulator, "vid") == ("InService", 0, 0)
    # No capacity for the first pool entry: the instance that comes back is the next one.
    emulator.set_faults(capacity_unavailable=["ml.g6.xlarge"])
    body, content_type = video_multipart()
    job = emulator.client("sagemaker-runtime").invoke_endpoint_async(
        EndpointName="vid", Body=body, ContentType=content_type, Accept="video/mp4", CustomAttributes=VIDEO_ROUTE)
    assert emulator.lifecycle()["load"]["vid"]["backlog"] == 1
    assert emulator.advance_clock(60)["events"] == []  # the alarm needs 2 one-minute periods
    started = emulator.advance_clock(60)["events"]
    assert [(e["from"], e["to"], e["phase"]) for e in started] == [(0, 1, "started")]
    assert "HasBacklogWithoutCapacity" in started[0]["cause"]
    assert counts(emulator, "vid") == ("Updating", 0, 1)
    assert emulator.lifecycle()["load"]["vid"]["backlog"] == 1  # still waiting for its instance
    done = emulator.advance_clock(480)["events"]
    assert [(e["from"], e["to"], e["phase"]) for e in done] == [(0, 1, "done")]
    mp4 = wait_for_object(emulator.client("s3"), job["OutputLocation"])
    assert mp4[4:8] == b"ftyp"
    desc = emulator.client("sagemaker").describe_endpoint(EndpointName="vid")
    pools = {p["InstanceType"]: p["CurrentInstanceCount"] for p in desc["ProductionVariants"][0]["InstancePools"]}
    assert pools == {"ml.g6.xlarge": 0, "ml.g5.xlarge": 1}
