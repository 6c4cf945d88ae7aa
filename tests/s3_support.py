"""S3 on moto's real server for the media tests: boto3's own environment pointed at it (`s3_env`), a plain client
to look at what a store did (`s3`), a fresh bucket per test (`media_bucket`). Load with
`pytest_plugins = ["tests.emulator_support", "tests.s3_support"]` (moto_server: one moto per session)."""

from __future__ import annotations

import os
import uuid
from typing import Any

import boto3
import pytest
from botocore.config import Config

from emulator.launch import FAKE_ACCESS_KEY_ID, FAKE_SECRET_ACCESS_KEY

REGION = "us-east-1"


def s3_environment(moto_server: str) -> dict[str, str]:
    """The environment a process needs to reach moto as boto3 reaches S3 (for a command the tests run)."""
    return {"AWS_ACCESS_KEY_ID": FAKE_ACCESS_KEY_ID, "AWS_SECRET_ACCESS_KEY": FAKE_SECRET_ACCESS_KEY,
            "AWS_ENDPOINT_URL_S3": moto_server, "AWS_ENDPOINT_URL_IAM": moto_server, "AWS_DEFAULT_REGION": REGION,
            "AWS_CONFIG_FILE": os.devnull, "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
            "AWS_EC2_METADATA_DISABLED": "true"}


@pytest.fixture
def s3_env(moto_server: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """boto3's own environment pointed at moto (AWS_ENDPOINT_URL_S3) with fake credentials and no shared files, so
    the store finds its endpoint and credentials the way it does in production; yields moto's URL."""
    for key in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_ENDPOINT_URL", "AWS_CA_BUNDLE", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(key, raising=False)
    for key, value in s3_environment(moto_server).items():
        monkeypatch.setenv(key, value)
    return moto_server


@pytest.fixture
def s3(moto_server: str) -> Any:
    """A plain boto3 client on moto, to look at what the store did."""
    return boto3.client("s3", endpoint_url=moto_server, region_name=REGION, aws_access_key_id=FAKE_ACCESS_KEY_ID,
                        aws_secret_access_key=FAKE_SECRET_ACCESS_KEY, config=Config(retries={"max_attempts": 1}))


@pytest.fixture
def media_bucket(s3: Any) -> str:
    """A fresh bucket in the session's moto (the `bucket` fixture's, without the SageMaker emulator it needs)."""
    name = f"omni-media-test-{uuid.uuid4().hex[:12]}"
    s3.create_bucket(Bucket=name)
    return name


def keys(s3: Any, bucket: str) -> list[str]:
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=bucket).get("Contents", []))
