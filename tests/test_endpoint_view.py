"""services/endpoint_view.py: the one DescribeEndpoint view infra and the services layer share."""

from __future__ import annotations

from datetime import UTC, datetime

import botocore.exceptions as bx
import pytest

from services.endpoint_view import EndpointView, describe_endpoint, instance_type_in_use


def _client_error(code: str, message: str) -> bx.ClientError:
    return bx.ClientError({"Error": {"Code": code, "Message": message}}, "DescribeEndpoint")


class _Sm:
    def __init__(self, answer: dict | Exception) -> None:
        self.answer = answer

    def describe_endpoint(self, EndpointName: str) -> dict:  # noqa: N803 (boto3's spelling)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


def test_a_pool_entry_holding_instances_is_the_type_in_use_and_counts_add_up():
    created = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    desc = {"EndpointName": "ep", "EndpointStatus": "InService", "EndpointConfigName": "ep-config",
            "EndpointArn": "arn:ep", "CreationTime": created,
            "ProductionVariants": [{"CurrentInstanceCount": 2, "DesiredInstanceCount": 3, "InstancePools": [
                {"InstanceType": "ml.g6.xlarge", "CurrentInstanceCount": 0},
                {"InstanceType": "ml.g5.xlarge", "CurrentInstanceCount": 2}]}]}
    view = describe_endpoint(_Sm(desc), "ep")
    assert view == EndpointView("ep", "InService", "ml.g5.xlarge", 2, 3, None, "ep-config", "arn:ep", created, desc)
    assert not view.gone


def test_a_single_type_pool_names_the_type_only_once_the_endpoint_runs():
    creating = {"EndpointStatus": "Creating", "ProductionVariants": [{}]}
    assert instance_type_in_use(creating, ("ml.g6.xlarge",)) is None
    assert instance_type_in_use({**creating, "EndpointStatus": "InService"}, ("ml.g6.xlarge",)) == "ml.g6.xlarge"
    assert instance_type_in_use({**creating, "EndpointStatus": "InService"}, ("ml.g6.xlarge", "ml.g5.xlarge")) is None


def test_could_not_find_is_gone_and_other_errors_propagate():
    gone = describe_endpoint(_Sm(_client_error("ValidationException", "Could not find endpoint \"ep\".")), "ep")
    assert gone.gone and gone.status == "gone" and gone.instance_type is None and gone.current_instances is None
    with pytest.raises(bx.ClientError):
        describe_endpoint(_Sm(_client_error("AccessDeniedException", "no")), "ep")
    with pytest.raises(bx.ClientError):
        describe_endpoint(_Sm(_client_error("ValidationException", "bad name")), "ep")
