"""Media in an S3 bucket: `s3://<bucket>/<prefix>/<record id>/<name>`, shared by every host of a team studio.

The client is the studio's boto3 session (services/aws.py: its model loader, profile and credential chain;
`AWS_ENDPOINT_URL_S3` and `AWS_CA_BUNDLE` honoured by boto3 itself) with this store's own configuration: SigV4
signatures (presigned URLs too: boto3 would otherwise presign S3 GETs the old SigV2 way), short connect timeouts and
few retries, so a page waiting on media learns of an unreachable endpoint in seconds, not minutes.
"""

from __future__ import annotations

import mimetypes
import threading
import time
import uuid
from typing import Any

import botocore.exceptions as bx
from botocore.config import Config

from protocol.errors import BackendUnreachable, ConfigError, ServerError, StudioError
from services.aws import DENIED_CODES, USER_AGENT_EXTRA, AwsSession, aws_error
from services.media_store.base import (
    URL_EXPIRES_DEFAULT_S,
    MediaError,
    MediaHealth,
    MediaMissing,
    MediaStore,
    check_expiry,
    plain_name,
)

CONNECT_TIMEOUT_S = 3.0
READ_TIMEOUT_S = 30.0
MAX_ATTEMPTS = 2  # one retry: S3's own 500/503 blips; never minutes of back-off against an endpoint that is down
PROBE_PREFIX = ".omni-studio-probe-"  # check()'s key under the prefix: a dot-name, so never a record's
MISSING_KEY_CODES = {"NoSuchKey", "404", "NotFound"}
PAGE_SIZE = 1000  # keys per listing page and per DeleteObjects call (S3's limit for both)


REUSE_LIFE = 0.8  # a presigned URL is handed out again while 4/5 of its life is left (a 5-minute URL: 1 minute)
SIGNED_KEPT = 4096  # URLs kept for reuse, at most


class S3MediaStore(MediaStore):
    def __init__(self, bucket: str, prefix: str = "", *, region: str, profile: str | None = None,
                 kms_key_id: str | None = None, endpoint_url: str | None = None,
                 connect_timeout_s: float = CONNECT_TIMEOUT_S, read_timeout_s: float = READ_TIMEOUT_S,
                 max_attempts: int = MAX_ATTEMPTS) -> None:
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.kms_key_id = kms_key_id or None
        self.profile = profile
        self.where = f"s3://{bucket}" + (f"/{self.prefix}" if self.prefix else "")
        self._base = f"{self.prefix}/" if self.prefix else ""
        self.page_size = PAGE_SIZE
        self.aws = AwsSession(region, profile)  # ConfigError naming a profile that is not configured
        self._signed: dict[tuple[str, str | None, int], tuple[str, float]] = {}  # url() reuse: (url, until)
        self._signed_lock = threading.Lock()
        config = Config(
            region_name=region, signature_version="s3v4", connect_timeout=connect_timeout_s,
            read_timeout=read_timeout_s, retries={"max_attempts": max_attempts, "mode": "standard"},
            user_agent_extra=USER_AGENT_EXTRA,
        )
        # endpoint_url None: boto3's own resolution (AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, the config file, AWS)
        try:
            self.client: Any = self.aws.session.client("s3", config=config, endpoint_url=endpoint_url)
        except (bx.BotoCoreError, ValueError) as exc:  # e.g. an AWS_ENDPOINT_URL_S3 that is not a URL
            raise ConfigError(f"the S3 client for {self.where} cannot be made ({exc}): check AWS_ENDPOINT_URL_S3 "
                              "(or AWS_ENDPOINT_URL) and the AWS config file's s3 settings") from None

    # -- keys ------------------------------------------------------------------------------------------
    def key(self, record_id: str, name: str) -> str:
        return f"{self._record_prefix(record_id)}{plain_name(name)}"

    def _record_prefix(self, record_id: str) -> str:
        return f"{self._base}{plain_name(record_id, 'record id')}/"  # the slash: record r1 is not r10's prefix

    def _sse(self) -> dict[str, str]:
        return {"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": self.kms_key_id} if self.kms_key_id else {}

    # -- the operations ----------------------------------------------------------------------------------
    def put(self, record_id: str, name: str, data: bytes) -> None:
        key = self.key(record_id, name)
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"  # what a browser given the URL plays
        try:  # S3 makes an object visible whole, once its upload is complete
            self.client.put_object(Bucket=self.bucket, Key=key, Body=bytes(data), ContentType=kind, **self._sse())
        except Exception as exc:  # noqa: BLE001 — every failure becomes one message (aws_error's catch-all included)
            raise self._error(exc, f"writing s3://{self.bucket}/{key}", "s3:PutObject") from None

    def get(self, record_id: str, name: str) -> bytes:
        key = self.key(record_id, name)
        try:
            answer = self.client.get_object(Bucket=self.bucket, Key=key)
            return answer["Body"].read()
        except bx.ClientError as exc:
            if _code(exc) in MISSING_KEY_CODES:
                raise MediaMissing(f"the file {name} of record {record_id} is missing from {self.where}") from None
            raise self._error(exc, f"reading s3://{self.bucket}/{key}", "s3:GetObject") from None
        except Exception as exc:  # noqa: BLE001
            raise self._error(exc, f"reading s3://{self.bucket}/{key}", "s3:GetObject") from None

    def exists(self, record_id: str, name: str) -> bool:
        key = self.key(record_id, name)
        try:
            self.client.head_object(Bucket=self.bucket, Key=key)
        except bx.ClientError as exc:
            if _code(exc) in MISSING_KEY_CODES:
                self._bucket_is_there(f"looking for s3://{self.bucket}/{key}")
                return False
            raise self._error(exc, f"looking for s3://{self.bucket}/{key}", "s3:GetObject") from None
        except Exception as exc:  # noqa: BLE001
            raise self._error(exc, f"looking for s3://{self.bucket}/{key}", "s3:GetObject") from None
        return True

    def _bucket_is_there(self, doing: str) -> None:
        """A HEAD answers 404 alike for a missing file and a missing bucket: after one, ask the bucket (a bucket
        the credentials may not ask about — 403 — is taken to be there: the file is what is missing)."""
        try:
            self.client.head_bucket(Bucket=self.bucket)
        except bx.ClientError as exc:
            if _code(exc) in MISSING_KEY_CODES | {"NoSuchBucket"}:
                raise self._missing_bucket(doing) from None
        except Exception as exc:  # noqa: BLE001
            raise self._error(exc, doing, "s3:ListBucket") from None

    def _keys(self, record_id: str) -> list[str]:
        prefix = self._record_prefix(record_id)
        keys: list[str] = []
        try:
            pages = self.client.get_paginator("list_objects_v2").paginate(
                Bucket=self.bucket, Prefix=prefix, PaginationConfig={"PageSize": self.page_size})
            for page in pages:
                keys += [o["Key"] for o in page.get("Contents", [])]
        except Exception as exc:  # noqa: BLE001
            raise self._error(exc, f"listing s3://{self.bucket}/{prefix}", "s3:ListBucket") from None
        return keys

    def list_record(self, record_id: str) -> list[str]:
        prefix = self._record_prefix(record_id)
        return sorted(k[len(prefix):] for k in self._keys(record_id) if "/" not in k[len(prefix):])

    def delete_record(self, record_id: str) -> int:
        keys = self._keys(record_id)
        prefix = self._record_prefix(record_id)
        for i in range(0, len(keys), self.page_size):
            batch = keys[i:i + self.page_size]
            try:
                answer = self.client.delete_objects(
                    Bucket=self.bucket, Delete={"Objects": [{"Key": k} for k in batch], "Quiet": True})
            except Exception as exc:  # noqa: BLE001
                raise self._error(exc, f"removing s3://{self.bucket}/{prefix}", "s3:DeleteObject") from None
            failed = answer.get("Errors") or []
            if failed:
                first = failed[0]
                raise MediaError(f"removing s3://{self.bucket}/{prefix}: {len(failed)} of its files could not be "
                                 f"removed ({first.get('Key')}: {first.get('Code')} {first.get('Message', '')}); "
                                 "the credentials in use need s3:DeleteObject there — remove them by hand if not")
        return len(keys)

    def url(self, record_id: str, name: str, expires_s: int = URL_EXPIRES_DEFAULT_S, *,
            download_as: str | None = None) -> str:
        key = self.key(record_id, name)
        check_expiry(expires_s)
        # A URL signed lately is handed out again while at least REUSE_LIFE of its life is left: a page that redraws
        # (every click) gives the browser the same address, so it shows the image from its cache instead of fetching
        # it again, and the page signs nothing (bench/history_backends.py, docs/storage.md).
        now = time.time()
        cache_key = (key, download_as, expires_s)
        with self._signed_lock:
            signed = self._signed.get(cache_key)
        if signed is not None and signed[1] - now >= expires_s * REUSE_LIFE:
            return signed[0]
        params = {"Bucket": self.bucket, "Key": key}
        if download_as is not None:  # S3 answers with this header: the browser saves the file under the name
            params["ResponseContentDisposition"] = f'attachment; filename="{plain_name(download_as)}"'
        doing = f"signing a URL for s3://{self.bucket}/{key}"
        try:
            # without credentials boto3 hands out an unsigned URL, which S3 refuses: say so here instead
            self.aws.credentials()
            url = self.client.generate_presigned_url("get_object", Params=params, ExpiresIn=expires_s)
        except StudioError as exc:
            raise type(exc)(f"{doing}: {exc}") from None
        except Exception as exc:  # noqa: BLE001
            raise self._error(exc, doing, "s3:GetObject") from None
        with self._signed_lock:
            if len(self._signed) >= SIGNED_KEPT:  # the lapsed ones go first; if none had, all (signed again)
                self._signed = {k: v for k, v in self._signed.items() if v[1] - now >= expires_s * REUSE_LIFE}
                if len(self._signed) >= SIGNED_KEPT:
                    self._signed.clear()
            self._signed[cache_key] = (url, now + expires_s)
        return url

    def check(self) -> MediaHealth:
        key = f"{self._base}{PROBE_PREFIX}{uuid.uuid4().hex[:12]}"
        data = uuid.uuid4().bytes
        step, action = "writing", "s3:PutObject"
        try:
            self.client.put_object(Bucket=self.bucket, Key=key, Body=data, **self._sse())
            step, action = "reading", "s3:GetObject"
            back = self.client.get_object(Bucket=self.bucket, Key=key)["Body"].read()
            step, action = "removing", "s3:DeleteObject"
            self.client.delete_object(Bucket=self.bucket, Key=key)
        except Exception as exc:  # noqa: BLE001 — a check answers, it does not raise
            problem = self._error(exc, f"checking the media bucket: {step} the probe s3://{self.bucket}/{key}", action)
            if step == "reading":  # written but not read back: try not to leave it behind
                try:
                    self.client.delete_object(Bucket=self.bucket, Key=key)
                except Exception:  # noqa: BLE001, S110 — the message above is the answer
                    pass
            return MediaHealth(False, self.where, str(problem))
        if back != data:
            return MediaHealth(False, self.where, f"{self.where} gave back other bytes than were written to it")
        return MediaHealth(True, self.where)

    # -- errors ------------------------------------------------------------------------------------------
    def _missing_bucket(self, doing: str) -> ConfigError:
        return ConfigError(f"{doing}: the bucket {self.bucket} does not exist: create it, or point media_url "
                           "(OMNI_STUDIO_MEDIA_URL) at a bucket that does (and region at its region)")

    def _error(self, exc: Exception, doing: str, action: str) -> StudioError:
        """One message a person can act on, naming the bucket and prefix (services.aws.aws_error for the rest:
        credentials, network, TLS)."""
        if isinstance(exc, bx.ClientError):
            code = _code(exc)
            message = str(exc.response.get("Error", {}).get("Message") or exc)
            if code == "NoSuchBucket":
                return self._missing_bucket(doing)
            if code in DENIED_CODES:
                kms = (f", and kms:GenerateDataKey/kms:Decrypt on the key {self.kms_key_id}" if self.kms_key_id
                       else "")
                hint = (" (S3 answers a missing file with 403 when the credentials may not s3:ListBucket)"
                        if action == "s3:GetObject" else "")
                return ServerError(f"{doing}: access denied to {self.where} ({message}); the credentials in use need "
                                   f"{action} on arn:aws:s3:::{self.bucket}/{self._base}*{kms}{hint}", status=403)
            if code.startswith("KMS.") or code == "KMSKeyNotFound":
                return ConfigError(f"{doing}: the KMS key {self.kms_key_id} cannot be used ({code}: {message}): check "
                                   "kms_key_id (OMNI_STUDIO_KMS_KEY_ID) and that the credentials may use the key")
        if isinstance(exc, bx.EndpointConnectionError | bx.ConnectTimeoutError):
            return BackendUnreachable(f"{doing}: cannot reach S3 for {self.where} ({exc}); check the network, the region and "
                              "AWS_ENDPOINT_URL_S3 (or AWS_ENDPOINT_URL) if one is set")
        return aws_error(exc, doing, profile=self.profile)


def _code(exc: bx.ClientError) -> str:
    return str(exc.response.get("Error", {}).get("Code", ""))
