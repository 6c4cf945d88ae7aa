"""Infra: stand up, watch and tear down the studio's SageMaker endpoints — a library first, with a thin CLI
(`python -m infra`). Every function returns typed results; long ones take a `progress` callback (called
from worker threads) and never print. Errors are `infra.errors.InfraError` (a services StudioError) with
a message that names what to fix.

    from infra import DeployOptions, deploy, resume, deployment_status, delete_deployment

    result = deploy(DeployOptions(roles=["voice", "image"], region="us-east-1"), state_file=path,
                    progress=on_progress)             # DeployResult: .ok, .outcomes[role], .error()
    report = deployment_status(path)                  # StatusReport: rows, $/hour, cost so far, .creating
    gone = delete_deployment(path)                    # DeleteReport: each deletion, .remaining, .state_removed
"""

from infra.delete import (
    DeleteReport,
    Deletion,
    delete_by_name,
    delete_deployment,
    deletion_plan,
)
from infra.converge import EndpointOutcome
from infra.deploy import DeployResult, deploy, resume
from infra.errors import InfraError
from infra.fleet import StudioFleet, studio_fleet
from infra.model import (
    DEFAULT_VOICE_MODEL,
    DeploymentSpec,
    DeployOptions,
    EndpointSpec,
    InstancePool,
    check_voice_model,
    deploy_command,
    shell_command,
    voice_model_label,
)
from infra.price_list import refresh_prices
from infra.pricing import PriceTable, load_prices
from infra.progress import Progress, WaitSettings
from infra.quotas import QuotaReport, check_quotas
from infra.smoke import SmokeReport, deployment_backend, record_smoke, run_smoke
from infra.state import DEFAULT_STATE_FILE, DeploymentState
from infra.cost import CostReport, cost_of_types, deployment_cost
from infra.status import StatusReport, deployment_status
from infra.sweep import SweepReport, delete_orphans, find_orphans

__all__ = [
    "DEFAULT_STATE_FILE", "DEFAULT_VOICE_MODEL", "CostReport", "DeleteReport", "Deletion", "DeployOptions", "DeployResult",
    "DeploymentSpec", "DeploymentState", "EndpointOutcome", "EndpointSpec", "InfraError", "InstancePool",
    "PriceTable", "Progress", "QuotaReport", "SmokeReport", "StatusReport", "StudioFleet", "SweepReport",
    "WaitSettings", "check_quotas", "cost_of_types", "delete_by_name", "delete_deployment", "delete_orphans",
    "deploy", "deployment_backend", "deployment_cost", "deployment_status", "find_orphans", "load_prices", "record_smoke",
    "refresh_prices", "resume", "run_smoke", "studio_fleet", "deletion_plan", "deploy_command", "shell_command",
    "check_voice_model", "voice_model_label",
]
