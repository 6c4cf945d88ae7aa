"""Part 2 of AWS's published sample, generate step, its calls only, in this project's words (not its files).

A PNG from the image endpoint (invoke_endpoint, the container route in CustomAttributes) and a 17-frame MP4
from the video endpoint (invoke_endpoint_async: the multipart/form-data request put to S3 first, with that
ContentType, the result polled in S3).

    python -m emulator exec -- python tests/samples/part2_generate.py --out DIR
"""

from __future__ import annotations

import argparse
import base64
import json
import sys
import time
from pathlib import Path

import boto3
from botocore.exceptions import ClientError
from urllib3 import encode_multipart_formdata

from part2_deploy import BUCKET  # noqa: I001 (the sample's scripts sit side by side)


def image(runtime, out: Path) -> None:  # noqa: ANN001
    body = {"prompt": "a lighthouse at dusk, oil painting", "size": "512x512", "num_inference_steps": 4, "seed": 7}
    reply = runtime.invoke_endpoint(EndpointName="sample-image", Body=json.dumps(body), ContentType="application/json",
                                    Accept="application/json", CustomAttributes="route=/v1/images/generations")
    png = base64.b64decode(json.loads(reply["Body"].read())["data"][0]["b64_json"])
    out.write_bytes(png)
    print(f"{out.name}: {len(png)} bytes", flush=True)


def video(runtime, s3, out: Path) -> None:  # noqa: ANN001
    fields = {"prompt": "waves rolling onto a beach", "num_frames": "17", "width": "256", "height": "256",
              "fps": "8", "num_inference_steps": "2", "seed": "7"}
    body, content_type = encode_multipart_formdata(fields)
    key = "async-in/video-request"
    s3.put_object(Bucket=BUCKET, Key=key, Body=body, ContentType=content_type)  # multipart/form-data; boundary=…
    reply = runtime.invoke_endpoint_async(EndpointName="sample-video", InputLocation=f"s3://{BUCKET}/{key}",
                                          ContentType=content_type, Accept="video/mp4",
                                          CustomAttributes="route=/v1/videos/sync")
    output, failure = reply["OutputLocation"], reply.get("FailureLocation")
    print(f"video job {reply['InferenceId']}: waiting for {output}", flush=True)
    for _ in range(600):
        for uri, ok in ((output, True), (failure, False)):
            if not uri:
                continue
            bucket, obj = uri[5:].split("/", 1)
            try:
                data = s3.get_object(Bucket=bucket, Key=obj)["Body"].read()
            except ClientError:
                continue
            if not ok:
                sys.exit(f"the video job failed: {data[:500]!r}")
            out.write_bytes(data)
            print(f"{out.name}: {len(data)} bytes", flush=True)
            return
        time.sleep(0.5)
    sys.exit("no video after 5 minutes")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=Path("."))
    args = ap.parse_args()
    runtime, s3 = boto3.client("sagemaker-runtime"), boto3.client("s3")
    image(runtime, args.out / "image.png")
    video(runtime, s3, args.out / "video.mp4")


if __name__ == "__main__":
    main()
