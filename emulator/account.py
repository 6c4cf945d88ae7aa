"""What the emulated account still holds, listed the way a person would check the console.

    left = holdings(ready)                 # {"endpoints": [...], ..., "objects": ["bucket/key", ...]}
    print(holdings_text(left))             # "nothing is left" or one line per kind that is not empty

`python -m emulator exec` prints it when its command ends, so a delivery script that forgets to clean up shows
what it would have left running (and billed) in a real account.
"""

from __future__ import annotations

from typing import Any

from emulator.launch import client_env

KINDS = ("endpoints", "endpoint configs", "models", "schedules", "schedule groups", "alarms", "scalable targets",
         "IAM roles", "buckets", "objects")
OBJECTS_SHOWN = 1000  # per bucket: a listing, not an inventory


def holdings(ready: dict[str, Any], *, role_path: str | None = None) -> dict[str, list[str]]:
    """Every kind in KINDS -> the names the emulator (and its moto) hold; `ready` is the emulator's ready line.
    `role_path` lists only the IAM roles under that path (e.g. the studio's TTL scheduler roles)."""
    import boto3

    env = client_env(ready)
    session = boto3.Session(aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                            aws_session_token=env["AWS_SESSION_TOKEN"], region_name=env["AWS_DEFAULT_REGION"])

    def client(service: str, url_env: str) -> Any:
        return session.client(service, endpoint_url=env.get(url_env, env["AWS_ENDPOINT_URL"]))

    sm = client("sagemaker", "AWS_ENDPOINT_URL_SAGEMAKER")
    scheduler = client("scheduler", "AWS_ENDPOINT_URL_SCHEDULER")
    cloudwatch = client("cloudwatch", "AWS_ENDPOINT_URL")
    aas = client("application-autoscaling", "AWS_ENDPOINT_URL_APPLICATION_AUTO_SCALING")
    iam = client("iam", "AWS_ENDPOINT_URL_IAM")
    left: dict[str, list[str]] = {
        "endpoints": [e["EndpointName"] for e in sm.list_endpoints(MaxResults=100)["Endpoints"]],
        "endpoint configs": [c["EndpointConfigName"] for c in sm.list_endpoint_configs(MaxResults=100)["EndpointConfigs"]],
        "models": [m["ModelName"] for m in sm.list_models(MaxResults=100)["Models"]],
        "schedules": [f"{s['GroupName']}/{s['Name']}" for s in scheduler.list_schedules()["Schedules"]],
        "schedule groups": [g["Name"] for g in scheduler.list_schedule_groups()["ScheduleGroups"] if g["Name"] != "default"],
        "alarms": [a["AlarmName"] for a in cloudwatch.describe_alarms()["MetricAlarms"]],
        "scalable targets": [t["ResourceId"] for t in
                             aas.describe_scalable_targets(ServiceNamespace="sagemaker")["ScalableTargets"]],
        "IAM roles": [r["RoleName"] for r in iam.list_roles(**({"PathPrefix": role_path} if role_path else {}))["Roles"]],
        "buckets": [],
        "objects": [],
    }
    if env.get("AWS_ENDPOINT_URL_S3"):
        s3 = client("s3", "AWS_ENDPOINT_URL_S3")
        for bucket in s3.list_buckets()["Buckets"]:
            left["buckets"].append(bucket["Name"])
            listed = s3.list_objects_v2(Bucket=bucket["Name"], MaxKeys=OBJECTS_SHOWN)
            left["objects"] += [f"{bucket['Name']}/{o['Key']}" for o in listed.get("Contents", [])]
    return left


def holdings_text(left: dict[str, list[str]]) -> str:
    """One line per kind that is not empty, or that nothing is left."""
    held = [(kind, names) for kind, names in left.items() if names]
    if not held:
        return "the emulated account holds nothing: " + ", ".join(KINDS) + " — none left"
    lines = ["the emulated account still holds (in a real account, what still runs costs money):"]
    for kind, names in held:
        shown = ", ".join(names[:20]) + (f", … ({len(names) - 20} more)" if len(names) > 20 else "")
        lines.append(f"  {kind} ({len(names)}): {shown}")
    return "\n".join(lines)
