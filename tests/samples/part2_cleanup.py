"""Part 2 of AWS's published sample, cleanup step, its calls only, in this project's words (not its files).

Deletes both endpoints (and waits until they are gone), their configs and models, then empties and deletes
the bucket.

    python -m emulator exec -- python tests/samples/part2_cleanup.py
"""

from __future__ import annotations

import boto3

from part2_deploy import BUCKET, ENDPOINTS


def main() -> None:
    sm, s3 = boto3.client("sagemaker"), boto3.client("s3")
    for name in ENDPOINTS:
        sm.delete_endpoint(EndpointName=name)
    for name in ENDPOINTS:
        sm.get_waiter("endpoint_deleted").wait(EndpointName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 120})
        sm.delete_endpoint_config(EndpointConfigName=name)
        sm.delete_model(ModelName=name)
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=BUCKET):
        for obj in page.get("Contents", []):
            s3.delete_object(Bucket=BUCKET, Key=obj["Key"])
    s3.delete_bucket(Bucket=BUCKET)
    print("cleaned up: " + ", ".join(ENDPOINTS) + f", s3://{BUCKET}", flush=True)


if __name__ == "__main__":
    main()
