"""Part 2 of AWS's published sample, deploy step, its calls only, in this project's words (not its files).

Creates a bucket for async results, then an image endpoint (realtime) and a video endpoint (async inference,
results in S3) on the vLLM-Omni DLC, and waits until both are InService. Ctrl-C while they are Creating stops
the waiting (the endpoints keep creating, as on AWS); `--resume` creates only what is missing and waits again.

    python -m emulator exec -- python tests/samples/part2_deploy.py [--resume]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import boto3
from botocore.exceptions import ClientError

REGION = os.environ.get("AWS_REGION", "us-east-1")
IMAGE = f"763104351884.dkr.ecr.{REGION}.amazonaws.com/vllm:omni-sagemaker-cuda-v1.6"
AMI = "al2023-ami-sagemaker-inference-gpu-4-1"
ROLE = "arn:aws:iam::123456789012:role/sample-sagemaker-execution-role"
BUCKET = "sample-omni-media-123456789012"
ENDPOINTS = {  # name -> (model id, extra environment, async?)
    "sample-image": ("black-forest-labs/FLUX.2-klein-4B", {}, False),
    "sample-video": ("Wan-AI/Wan2.1-VACE-1.3B-diffusers", {"SM_VLLM_VAE_USE_TILING": "true"}, True),
}


def exists(call, **kwargs) -> bool:  # noqa: ANN001
    try:
        call(**kwargs)
        return True
    except ClientError as exc:
        if exc.response["Error"]["Code"] in ("ValidationException", "ResourceNotFound"):
            return False
        raise


def create(sm, s3) -> None:  # noqa: ANN001
    if BUCKET not in [b["Name"] for b in s3.list_buckets()["Buckets"]]:
        s3.create_bucket(Bucket=BUCKET)
    for name, (model_id, env, is_async) in ENDPOINTS.items():
        if not exists(sm.describe_model, ModelName=name):
            sm.create_model(ModelName=name, ExecutionRoleArn=ROLE, PrimaryContainer={
                "Image": IMAGE, "Environment": {"SM_VLLM_MODEL": model_id, **env}})
        if not exists(sm.describe_endpoint_config, EndpointConfigName=name):
            config = {"EndpointConfigName": name, "ProductionVariants": [{
                "VariantName": "AllTraffic", "ModelName": name, "InstanceType": "ml.g6e.xlarge",
                "InitialInstanceCount": 1, "InferenceAmiVersion": AMI}]}
            if is_async:
                config["AsyncInferenceConfig"] = {"OutputConfig": {
                    "S3OutputPath": f"s3://{BUCKET}/async-out/", "S3FailurePath": f"s3://{BUCKET}/async-failed/"}}
            sm.create_endpoint_config(**config)
        if not exists(sm.describe_endpoint, EndpointName=name):
            sm.create_endpoint(EndpointName=name, EndpointConfigName=name)


def wait(sm) -> None:  # noqa: ANN001
    pending = set(ENDPOINTS)
    while pending:
        for name in sorted(pending):
            status = sm.describe_endpoint(EndpointName=name)["EndpointStatus"]
            print(f"{name}: {status}", flush=True)
            if status == "InService":
                pending.discard(name)
            elif status == "Failed":
                sys.exit(f"{name} failed")
        time.sleep(1)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--resume", action="store_true", help="create what is missing, then wait again")
    args = ap.parse_args()
    sm, s3 = boto3.client("sagemaker"), boto3.client("s3")
    try:
        create(sm, s3)  # idempotent: with --resume only what is missing is created
        wait(sm)
    except KeyboardInterrupt:
        print("interrupted: the endpoints keep creating; run again with --resume to wait for them", flush=True)
        return 130
    print("deployed: " + ", ".join(ENDPOINTS), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
