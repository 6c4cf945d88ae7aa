"""The team studio's CloudFormation template (deploy/team-studio.yaml), checked without an AWS account: cfn-lint
(AWS's own linter of templates against every resource's schema) finds nothing, and the template keeps the
promises docs/hosting.md makes of the team studio's shape — a sticky load balancer that asks the storage-aware
health route, replicas reached only through it, no password or secret in plain text, storage encrypted and never
public, and settings the studio knows.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "deploy" / "team-studio.yaml"
LINT = "import sys; from cfnlint.runner import main; sys.argv[0] = 'cfn-lint'; sys.exit(main())"


def cfn_lint(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", LINT, str(path)], capture_output=True, text=True, timeout=300)


def template() -> dict[str, Any]:
    from cfnlint.decode import decode

    loaded, problems = decode(str(TEMPLATE))
    assert not problems, problems
    return loaded


def resources(of_type: str) -> list[dict[str, Any]]:
    return [r["Properties"] for r in template()["Resources"].values() if r["Type"] == of_type]


def one(of_type: str) -> dict[str, Any]:
    found = resources(of_type)
    assert len(found) == 1, f"{len(found)} {of_type}"
    return found[0]


def test_cfn_lint_finds_nothing() -> None:
    out = cfn_lint(TEMPLATE)
    assert out.returncode == 0, out.stdout + out.stderr


def test_cfn_lint_is_really_run(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yaml"
    broken.write_text(TEMPLATE.read_text().replace("HealthCheckPath: /_stcore/health", "HealthCheckPaht: /x"))
    out = cfn_lint(broken)
    assert out.returncode != 0 and "HealthCheckPaht" in out.stdout


def test_the_load_balancer_is_sticky_and_asks_the_storage_aware_health_route() -> None:
    group = one("AWS::ElasticLoadBalancingV2::TargetGroup")
    assert group["HealthCheckPath"] == "/_stcore/health"  # 503 naming the database or bucket (serve.py)
    assert group["Port"] == 8501 and group["TargetType"] == "ip"
    attributes = {a["Key"]: a["Value"] for a in group["TargetGroupAttributes"]}
    assert attributes["stickiness.enabled"] == "true" and attributes["stickiness.type"] == "lb_cookie"
    listeners = resources("AWS::ElasticLoadBalancingV2::Listener")
    assert {(x["Protocol"], x["Port"]) for x in listeners} == {("HTTPS", 443), ("HTTP", 80)}
    redirect = next(x for x in listeners if x["Protocol"] == "HTTP")["DefaultActions"][0]
    assert redirect["Type"] == "redirect" and redirect["RedirectConfig"]["Protocol"] == "HTTPS"
    balancer = one("AWS::ElasticLoadBalancingV2::LoadBalancer")
    idle = {a["Key"]: a["Value"] for a in balancer["LoadBalancerAttributes"]}["idle_timeout.timeout_seconds"]
    assert int(idle) >= 600  # the studio's WebSocket outlives the default 60 s of quiet


def test_replicas_are_reached_only_through_the_balancer_and_the_database_only_by_them() -> None:
    groups = {name: r["Properties"] for name, r in template()["Resources"].items()
              if r["Type"] == "AWS::EC2::SecurityGroup"}
    replica_in = groups["ReplicaSecurityGroup"]["SecurityGroupIngress"]
    assert [(r["FromPort"], r["SourceSecurityGroupId"]) for r in replica_in] == [(8501, {"Ref": "BalancerSecurityGroup"})]
    db_in = groups["DatabaseSecurityGroup"]["SecurityGroupIngress"]
    assert [(r["FromPort"], r["SourceSecurityGroupId"]) for r in db_in] == [(5432, {"Ref": "ReplicaSecurityGroup"})]
    service = one("AWS::ECS::Service")
    assert service["NetworkConfiguration"]["AwsvpcConfiguration"]["AssignPublicIp"] == "DISABLED"
    rolling = service["DeploymentConfiguration"]
    assert rolling["MinimumHealthyPercent"] == 100 and rolling["DeploymentCircuitBreaker"]["Rollback"] is True


def test_storage_is_encrypted_and_never_public() -> None:
    db = one("AWS::RDS::DBInstance")
    assert db["Engine"] == "postgres" and db["StorageEncrypted"] is True and db["PubliclyAccessible"] is False
    assert db["ManageMasterUserPassword"] is True and "MasterUserPassword" not in db
    bucket = one("AWS::S3::Bucket")
    assert all(bucket["PublicAccessBlockConfiguration"].values())
    rule = bucket["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]
    assert rule["SSEAlgorithm"] == "aws:kms"


def test_the_replicas_settings_are_the_studios_own_and_hold_no_secret() -> None:
    from services.settings import ENV_PREFIX, Settings

    task = one("AWS::ECS::TaskDefinition")
    studio = next(c for c in task["ContainerDefinitions"] if c["Name"] == "studio")
    env = {e["Name"]: e["Value"] for e in studio["Environment"]}
    known = {ENV_PREFIX + name.upper() for name in Settings.model_fields} | {ENV_PREFIX + "CONFIG"}
    assert {n for n in env if n.startswith(ENV_PREFIX)} <= known, "a variable the studio does not read"
    url = env["OMNI_STUDIO_DATABASE_URL"]["Fn::Sub"]
    assert url.startswith("postgresql://studio@") and ":" not in url.split("@")[0].removeprefix("postgresql://")
    assert env["OMNI_STUDIO_MEDIA_URL"]["Fn::Sub"].startswith("s3://")
    secrets = {s["Name"] for s in studio["Secrets"]}
    assert "PGPASSWORD" in secrets  # libpq's variable, from RDS's own secret
    writer = next(c for c in task["ContainerDefinitions"] if c["Name"] == "secrets")
    assert {s["Name"] for s in writer["Secrets"]} == {"STREAMLIT_SECRETS", "STUDIO_SETTINGS"}
    assert studio["DependsOn"] == [{"ContainerName": "secrets", "Condition": "SUCCESS"}]
    text = TEMPLATE.read_text()
    for word in ("cookie_secret =", "client_secret =", "AKIA", " MasterUserPassword:", "PGPASSWORD="):
        assert word not in text


@pytest.mark.parametrize("needed", ["s3:GetObject", "s3:PutObject", "s3:DeleteObject", "kms:GenerateDataKey",
                                    "kms:Decrypt", "sagemaker:InvokeEndpoint", "sagemaker:InvokeEndpointAsync"])
def test_the_task_role_may_do_what_a_replica_does(needed: str) -> None:
    role = next(r["Properties"] for name, r in template()["Resources"].items() if name == "TaskRole")
    actions = [a for p in role["Policies"] for s in p["PolicyDocument"]["Statement"]
               for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])]
    assert needed in actions
