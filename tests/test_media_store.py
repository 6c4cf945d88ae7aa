"""The media store (services/media_store) with real parts only: the folder store on a real folder (and a real tiny
full filesystem), the S3 store against moto's real server on loopback, its presigned URLs fetched over HTTP.

moto speaks S3's wire protocol but, unlike S3, checks neither a presigned URL's signature nor its expiry: the tests
assert what the URL says (SigV4, its X-Amz-Expires) and that moto serves its bytes, not that AWS would refuse it
later."""

from __future__ import annotations

import json
import mimetypes
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import httpx
import pytest

from emulator.launch import FAKE_ACCESS_KEY_ID
from protocol.errors import BackendUnreachable, ConfigError, InvalidInput, ServerError
from services.media_store import (
    MEDIA_DIR,
    FolderMediaStore,
    MediaError,
    MediaMissing,
    open_media_store,
)
from services.media_store.s3 import S3MediaStore
from services.settings import Settings, load_settings
from tests.disk_support import run_on_tiny_disk
pytest.register_assert_rewrite("tests.s3_support")  # a plugin of this module, imported first here
from tests.s3_support import REGION, keys  # noqa: E402

pytest_plugins = ["tests.emulator_support", "tests.s3_support"]  # moto_server: one moto per session; s3_env, s3

ROOT = Path(__file__).resolve().parent.parent
KMS_KEY = "arn:aws:kms:us-east-1:123456789012:key/1234abcd-12ab-34cd-56ef-1234567890ab"
UNREACHABLE = "http://127.0.0.1:9"
BAD_NAMES = ["", ".", "..", "../x", "a/b", "a\\b", ".hidden"]


def payload(n: int = 200_000, seed: int = 0) -> bytes:
    return os.urandom(8) + bytes((i * 31 + seed) % 251 for i in range(n - 8))


# ------------------------------------------------------------------------------------------------------------
# The settings
def test_media_url_defaults_to_the_data_folder_and_takes_a_folder_or_a_bucket(tmp_path: Path) -> None:
    base = {"OMNI_STUDIO_CONFIG": "", "OMNI_STUDIO_DATA_DIR": str(tmp_path / "data")}
    s = load_settings(base)
    assert (s.media_url, s.kms_key_id) == ("", None)
    store = open_media_store(s)
    assert isinstance(store, FolderMediaStore) and store.root == tmp_path / "data" / MEDIA_DIR  # today's folder
    assert open_media_store(load_settings(base | {"OMNI_STUDIO_MEDIA_URL": str(tmp_path / "m")})).root == tmp_path / "m"
    s = load_settings(base | {"OMNI_STUDIO_MEDIA_URL": "s3://team-media/omni/studio/", "OMNI_STUDIO_KMS_KEY_ID": KMS_KEY})
    assert (s.media_url, s.kms_key_id) == ("s3://team-media/omni/studio", KMS_KEY)
    store = open_media_store(s)  # makes no network call
    assert isinstance(store, S3MediaStore)
    assert (store.bucket, store.prefix, store.kms_key_id, store.where) == (
        "team-media", "omni/studio", KMS_KEY, "s3://team-media/omni/studio")
    assert store.key("r1", "take.wav") == "omni/studio/r1/take.wav"
    assert S3MediaStore("team-media", "", region=REGION).key("r1", "take.wav") == "r1/take.wav"


URL, KMS = "OMNI_STUDIO_MEDIA_URL", "OMNI_STUDIO_KMS_KEY_ID"


@pytest.mark.parametrize(("env", "named", "says"), [
    ({URL: "gs://team-media/x"}, URL, "media_url is a folder (e.g. /srv/omni-media, or empty for <data_dir>/media) or "
     "an S3 bucket written s3://bucket/prefix, e.g. s3://my-team-bucket/omni-studio (got 'gs://team-media/x')"),
    ({URL: "s3:/team-media"}, URL, "or an S3 bucket written s3://bucket/prefix"),
    ({URL: "s3://Team_Media/x"}, URL, "'Team_Media' in media_url is not an S3 bucket name"),
    ({URL: "s3://team-media/a/../b"}, URL, "the prefix 'a/../b' in media_url is plain segments"),
    ({URL: "s3://team-media/a//b"}, URL, "no empty segment"),
    ({URL: "s3://team-media/a?x=1"}, URL, "no ?query"),
    ({KMS: "alias/media"}, KMS, "kms_key_id encrypts the media bucket's objects, and media_url names no bucket: set "
     "media_url to s3://bucket/prefix"),
    ({URL: "s3://team-media", KMS: "my key"}, KMS, "'my key' is not a KMS key: write its id"),
])
def test_a_bad_media_setting_is_named_with_what_to_write(env: dict[str, str], named: str, says: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_settings({"OMNI_STUDIO_CONFIG": "", **env})
    assert f"{named} (environment variable): " in str(err.value) and says in str(err.value)


def test_the_media_settings_read_from_studio_toml(tmp_path: Path) -> None:
    toml = tmp_path / "studio.toml"
    toml.write_text('media_url = "s3://team-media/omni"\nkms_key_id = "alias/omni-media"\n')
    s = load_settings({}, config_file=toml)
    assert (s.media_url, s.kms_key_id) == ("s3://team-media/omni", "alias/omni-media")
    toml.write_text('media_url = "http://files.example.org/media"\n')
    with pytest.raises(ConfigError, match=f"media_url in {toml}: media_url is a folder"):
        load_settings({}, config_file=toml)


# ------------------------------------------------------------------------------------------------------------
# The folder
def test_folder_round_trips_bytes_in_todays_layout(tmp_path: Path) -> None:
    store = FolderMediaStore(tmp_path / "media")
    data = payload()
    store.put("rec1", "take.wav", data)
    store.put("rec1", "input.png", b"png")
    assert (tmp_path / "media" / "rec1" / "take.wav").read_bytes() == data  # <root>/<record id>/<name>, as today
    assert store.get("rec1", "take.wav") == data
    assert store.exists("rec1", "take.wav") and not store.exists("rec1", "other.wav") and not store.exists("r2", "x")
    assert store.list_record("rec1") == ["input.png", "take.wav"] and store.list_record("nothing") == []
    store.put("rec1", "take.wav", b"again")  # replaced whole
    assert store.get("rec1", "take.wav") == b"again"
    assert store.url("rec1", "take.wav", 60) is None  # the studio serves a folder's bytes itself
    assert not list((tmp_path / "media").rglob("*.part"))


def test_folder_delete_record_removes_the_record_and_nothing_else(tmp_path: Path) -> None:
    store = FolderMediaStore(tmp_path / "media")
    for rec in ("r1", "r10", "r2"):
        for name in ("a.wav", "b.json"):
            store.put(rec, name, rec.encode())
    assert store.delete_record("r1") == 2
    assert not (tmp_path / "media" / "r1").exists()
    assert store.list_record("r10") == store.list_record("r2") == ["a.wav", "b.json"]
    assert store.delete_record("r1") == 0  # already gone: nothing to do


def test_folder_get_of_a_missing_file_names_the_file_the_record_and_the_folder(tmp_path: Path) -> None:
    store = FolderMediaStore(tmp_path / "media")
    store.put("rec1", "take.wav", b"x")
    with pytest.raises(MediaMissing) as err:
        store.get("rec1", "gone.wav")
    assert str(err.value) == f"the file gone.wav of record rec1 is missing from {tmp_path / 'media'}"
    with pytest.raises(MediaMissing, match="the file take.wav of record rec2 is missing"):
        store.get("rec2", "take.wav")


def test_a_reader_never_sees_half_a_file(tmp_path: Path) -> None:
    """A writer replaces the file again and again with one of two large payloads while a reader reads it: every
    read is one payload whole (temp file + rename), never a mix or a part."""
    store = FolderMediaStore(tmp_path / "media")
    big = [payload(2_000_000, seed=1), payload(2_000_000, seed=2)]
    store.put("rec", "big.bin", big[0])
    stop, seen, bad = threading.Event(), [0], []

    def read() -> None:
        while not stop.is_set():
            got = store.get("rec", "big.bin")
            seen[0] += 1
            if got not in big:
                bad.append(len(got))

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(30):
            store.put("rec", "big.bin", big[i % 2])
    finally:
        stop.set()
        reader.join(30)
    assert seen[0] > 0 and bad == []


@pytest.mark.parametrize("name", BAD_NAMES)
def test_names_and_record_ids_are_single_plain_segments(tmp_path: Path, name: str) -> None:
    store = FolderMediaStore(tmp_path / "media")
    s3 = S3MediaStore("team-media", "p", region=REGION, endpoint_url=UNREACHABLE)  # refused before any call
    for call in (lambda s: s.put("rec", name, b"x"), lambda s: s.get("rec", name), lambda s: s.exists(name, "a"),
                 lambda s: s.delete_record(name), lambda s: s.list_record(name), lambda s: s.url("rec", name)):
        for s in (store, s3):
            with pytest.raises(InvalidInput, match="not a plain file name"):
                call(s)
    assert not (tmp_path / "x").exists() and list(tmp_path.rglob("*")) == []


def test_folder_check_answers_whether_the_folder_is_writable(tmp_path: Path) -> None:
    health = FolderMediaStore(tmp_path / "media").check()
    assert health.ok and health.where == str(tmp_path / "media") and health.problem is None
    assert list((tmp_path / "media").iterdir()) == []  # the probe is removed
    (tmp_path / "a-file").write_text("not a folder")
    health = FolderMediaStore(tmp_path / "a-file" / "media").check()
    assert not health.ok
    assert health.problem.startswith(f"the media folder {tmp_path / 'a-file' / 'media'} cannot be written (")
    assert "point media_url (OMNI_STUDIO_MEDIA_URL) at a writable folder" in health.problem
    with pytest.raises(MediaError, match=f"cannot write {tmp_path / 'a-file' / 'media' / 'r' / 'a.wav'} .*check "
                                         f"that {tmp_path / 'a-file' / 'media'} .* is a writable folder"):
        FolderMediaStore(tmp_path / "a-file" / "media").put("r", "a.wav", b"x")


FULL_DISK_SCRIPT = """
import sys
from pathlib import Path
from services.media_store import FolderMediaStore, MediaError
root = Path(sys.argv[1])
store = FolderMediaStore(root)
store.put("small", "a.bin", b"fits")
try:
    store.put("big", "b.bin", b"x" * 200_000)
except MediaError as exc:
    print("ERROR", exc)
print("PARTS", sorted(str(p.relative_to(root)) for p in root.rglob("*.part")))
print("SMALL", store.get("small", "a.bin").decode())
store.put("small", "c.bin", b"still room for this")  # the partial file's space came back
print("CHECK", store.check().ok)
"""


def test_folder_on_a_full_disk_says_so_and_leaves_no_partial_file(tmp_path: Path) -> None:
    """A real 64 KiB filesystem: a 200 KB put fails with the disk named, its partial file is removed (so the next
    small write fits), and what was there is untouched."""
    mount = tmp_path / "media"
    r = run_on_tiny_disk(mount, "64k", [sys.executable, "-c", FULL_DISK_SCRIPT, str(mount)], cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines == [f"ERROR No space left on device writing {mount / 'big' / 'b.bin'}: free space on {mount} (the "
                     "media folder, media_url) and run it again", "PARTS []", "SMALL fits", "CHECK True"]


# ------------------------------------------------------------------------------------------------------------
# S3, on moto's server
def test_s3_round_trips_real_bytes_under_prefix_record_name(s3_env: str, s3: Any, media_bucket: str) -> None:
    store = S3MediaStore(media_bucket, "team/media", region=REGION)  # endpoint: AWS_ENDPOINT_URL_S3
    items = {f"item{i:02d}.png": payload(seed=i) for i in range(3)}
    for name, data in items.items():
        store.put("rec1", name, data)
    assert keys(s3, media_bucket) == [f"team/media/rec1/{n}" for n in sorted(items)]
    for name, data in items.items():
        assert store.get("rec1", name) == data
    assert store.list_record("rec1") == sorted(items) and store.list_record("rec2") == []
    assert store.exists("rec1", "item00.png") and not store.exists("rec1", "nope.png")
    head = s3.head_object(Bucket=media_bucket, Key="team/media/rec1/item00.png")
    assert head["ContentType"] == "image/png" and head["ContentLength"] == 200_000
    store.put("rec1", "item00.png", b"replaced")
    assert store.get("rec1", "item00.png") == b"replaced"


def test_s3_get_of_a_missing_file_names_the_file_the_record_and_the_bucket(s3_env: str, media_bucket: str) -> None:
    store = S3MediaStore(media_bucket, "team", region=REGION)
    store.put("rec1", "take.wav", b"x")
    with pytest.raises(MediaMissing) as err:
        store.get("rec1", "gone.wav")
    assert str(err.value) == f"the file gone.wav of record rec1 is missing from s3://{media_bucket}/team"


def test_s3_delete_record_removes_every_object_of_the_record_and_nothing_else(
        s3_env: str, s3: Any, media_bucket: str) -> None:
    store = S3MediaStore(media_bucket, "team", region=REGION)
    other = S3MediaStore(media_bucket, "elsewhere", region=REGION)
    for name in ("a.wav", "b.json", "c.png"):
        store.put("r1", name, b"1")
    store.put("r10", "a.wav", b"10")  # shares r1's first characters
    store.put("r2", "a.wav", b"2")
    other.put("r1", "a.wav", b"other prefix")
    s3.put_object(Bucket=media_bucket, Key="team/r1", Body=b"a key named like the record, not under it")
    before = keys(s3, media_bucket)
    assert store.delete_record("r1") == 3
    after = keys(s3, media_bucket)
    assert after == [k for k in before if not k.startswith("team/r1/")] and len(after) == len(before) - 3
    assert store.list_record("r1") == [] and store.delete_record("r1") == 0
    assert other.get("r1", "a.wav") == b"other prefix" and store.get("r10", "a.wav") == b"10"


def test_s3_delete_record_pages_through_listings_and_batches(s3_env: str, s3: Any, media_bucket: str) -> None:
    """More keys than one listing page and one DeleteObjects call hold: every one goes. S3's page is 1000 keys; the
    store's page is made 7 here so that 20 keys take three listings and three deletions (the same code path)."""
    store = S3MediaStore(media_bucket, "", region=REGION)
    store.page_size = 7
    for i in range(20):
        s3.put_object(Bucket=media_bucket, Key=f"big/f{i:02d}.bin", Body=b"")
    store.put("keep", "a.bin", b"k")
    assert store.list_record("big") == [f"f{i:02d}.bin" for i in range(20)]
    assert store.delete_record("big") == 20
    assert keys(s3, media_bucket) == ["keep/a.bin"]


def test_s3_presigned_url_is_sigv4_lives_as_asked_and_serves_the_bytes(s3_env: str, media_bucket: str) -> None:
    store = S3MediaStore(media_bucket, "team", region=REGION)
    data = payload()
    store.put("rec1", "take.wav", data)
    url = store.url("rec1", "take.wav", 90)
    parts = urlsplit(url)
    query = parse_qs(parts.query)
    assert f"{parts.scheme}://{parts.netloc}" == s3_env and parts.path.endswith("/team/rec1/take.wav")
    assert query["X-Amz-Algorithm"] == ["AWS4-HMAC-SHA256"]  # SigV4, not SigV2's AWSAccessKeyId/Expires
    assert query["X-Amz-Expires"] == ["90"]
    assert query["X-Amz-Credential"][0].startswith(f"{FAKE_ACCESS_KEY_ID}/") and "/us-east-1/s3/aws4_request" in \
        query["X-Amz-Credential"][0]
    assert "AWSAccessKeyId" not in query and "Signature" not in query
    # moto checks neither the signature nor the expiry: this shows the URL reaches the object, not that AWS accepts it
    r = httpx.get(url, trust_env=False, timeout=10)
    assert r.status_code == 200 and r.content == data and r.headers["content-type"] == mimetypes.guess_type("take.wav")[0]
    assert parse_qs(urlsplit(store.url("rec1", "take.wav")).query)["X-Amz-Expires"] == ["300"]  # the default
    for bad in (0, -1, 7 * 24 * 3600 + 1, 1.5):
        with pytest.raises(InvalidInput, match="a media URL lives 1 to 604800 seconds"):
            store.url("rec1", "take.wav", bad)


def test_s3_presigned_urls_are_handed_out_again_while_most_of_their_life_is_left(
        s3_env: str, media_bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A page redrawn within a minute gives the browser the same 5-minute URL (its cache shows the image again);
    after that a new one, so no URL handed out has less than 4 of its 5 minutes left."""
    from services.media_store import s3 as s3_module

    store = S3MediaStore(media_bucket, "team", region=REGION)
    store.put("rec1", "take.wav", payload())
    clock = [1_900_000_000.0]
    monkeypatch.setattr(s3_module.time, "time", lambda: clock[0])
    signed: list[dict] = []
    sign = store.client.generate_presigned_url
    monkeypatch.setattr(store.client, "generate_presigned_url",
                        lambda *a, **k: signed.append(k) or sign(*a, **k))
    first = store.url("rec1", "take.wav")
    clock[0] += 60.0  # exactly 4/5 of its life left: still handed out
    assert store.url("rec1", "take.wav") == first and len(signed) == 1
    saved = parse_qs(urlsplit(store.url("rec1", "take.wav", download_as="t.wav")).query)  # another answer header
    assert saved["response-content-disposition"] == ['attachment; filename="t.wav"'] and len(signed) == 2  # its own
    assert store.url("rec1", "take.wav", 90) != first and len(signed) == 3  # another life: its own URL
    clock[0] += 1.0
    again = store.url("rec1", "take.wav")
    assert len(signed) == 4 and parse_qs(urlsplit(again).query)["X-Amz-Expires"] == ["300"]  # signed anew


def test_s3_with_a_kms_key_writes_sse_kms_under_that_key(s3_env: str, s3: Any, media_bucket: str) -> None:
    store = S3MediaStore(media_bucket, "team", region=REGION, kms_key_id=KMS_KEY)
    store.put("rec1", "take.wav", b"secret")
    head = s3.head_object(Bucket=media_bucket, Key="team/rec1/take.wav")  # what moto recorded of the PUT
    assert head["ServerSideEncryption"] == "aws:kms" and head["SSEKMSKeyId"] == KMS_KEY
    assert store.get("rec1", "take.wav") == b"secret"
    assert store.check().ok  # the probe is written under the key too
    plain = S3MediaStore(media_bucket, "team", region=REGION)
    plain.put("rec2", "take.wav", b"plain")
    assert s3.head_object(Bucket=media_bucket, Key="team/rec2/take.wav").get("ServerSideEncryption") != "aws:kms"


def test_s3_a_missing_bucket_is_named_with_what_to_do(s3_env: str) -> None:
    store = S3MediaStore("omni-media-no-such-bucket", "team", region=REGION)
    says = ("the bucket omni-media-no-such-bucket does not exist: create it, or point media_url "
            "(OMNI_STUDIO_MEDIA_URL) at a bucket that does")
    for call, doing in ((lambda: store.put("r", "a.wav", b"x"), "writing s3://omni-media-no-such-bucket/team/r/a.wav"),
                        (lambda: store.get("r", "a.wav"), "reading s3://omni-media-no-such-bucket/team/r/a.wav"),
                        (lambda: store.exists("r", "a.wav"), "looking for s3://omni-media-no-such-bucket/team/r/a.wav"),
                        (lambda: store.list_record("r"), "listing s3://omni-media-no-such-bucket/team/r/"),
                        (lambda: store.delete_record("r"), "listing s3://omni-media-no-such-bucket/team/r/")):
        with pytest.raises(ConfigError) as err:
            call()
        assert str(err.value).startswith(f"{doing}: {says}")
    health = store.check()
    assert not health.ok and health.where == "s3://omni-media-no-such-bucket/team" and says in health.problem


def test_s3_forbidden_by_a_bucket_policy_names_the_permission(s3_env: str, s3: Any, media_bucket: str) -> None:
    """moto enforces a bucket policy's Deny on object operations by itself (HTTP 403, as S3 answers)."""
    store = S3MediaStore(media_bucket, "team", region=REGION)
    store.put("rec1", "take.wav", b"x")
    s3.put_bucket_policy(Bucket=media_bucket, Policy=json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Deny", "Principal": "*", "Action": ["s3:PutObject", "s3:GetObject", "s3:DeleteObject"],
        "Resource": f"arn:aws:s3:::{media_bucket}/team/*"}]}))
    with pytest.raises(ServerError) as err:
        store.put("rec1", "b.wav", b"x")
    assert err.value.status == 403
    assert str(err.value).startswith(f"writing s3://{media_bucket}/team/rec1/b.wav: access denied to "
                                     f"s3://{media_bucket}/team (")
    assert f"the credentials in use need s3:PutObject on arn:aws:s3:::{media_bucket}/team/*" in str(err.value)
    with pytest.raises(ServerError, match=f"need s3:GetObject on arn:aws:s3:::{media_bucket}/team/"):
        store.get("rec1", "take.wav")
    with pytest.raises(MediaError, match=f"removing s3://{media_bucket}/team/rec1/: 1 of its files could not be "
                                         "removed \\(team/rec1/take.wav: AccessDenied"):
        store.delete_record("rec1")
    health = store.check()
    assert not health.ok and "writing the probe" in health.problem and "need s3:PutObject" in health.problem


def test_s3_check_that_cannot_read_back_names_the_step_and_removes_its_probe(
        s3_env: str, s3: Any, media_bucket: str) -> None:
    s3.put_bucket_policy(Bucket=media_bucket, Policy=json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Deny", "Principal": "*", "Action": "s3:GetObject", "Resource": f"arn:aws:s3:::{media_bucket}/*"}]}))
    health = S3MediaStore(media_bucket, "team", region=REGION).check()
    assert not health.ok and health.problem.startswith(
        f"checking the media bucket: reading the probe s3://{media_bucket}/team/.omni-studio-probe-")
    assert f"need s3:GetObject on arn:aws:s3:::{media_bucket}/team/*" in health.problem
    assert keys(s3, media_bucket) == []


def test_s3_access_denied_to_credentials_without_the_permission(s3_env: str, moto_server: str,
                                                                media_bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """moto's IAM enforcement (its /moto-api/reset-auth; the session's moto, put back as it was in `finally`): a user
    that may only read gets S3's own AccessDenied on a write, signature and all checked by moto."""
    iam = boto3.client("iam", endpoint_url=moto_server, region_name=REGION)
    user = f"reader-{uuid.uuid4().hex[:8]}"
    iam.create_user(UserName=user)
    iam.put_user_policy(UserName=user, PolicyName="read-only", PolicyDocument=json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["s3:GetObject", "s3:ListBucket"],
                                                "Resource": "*"}]}))
    key = iam.create_access_key(UserName=user)["AccessKey"]
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", key["AccessKeyId"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", key["SecretAccessKey"])
    store = S3MediaStore(media_bucket, "team", region=REGION)
    previous = httpx.post(f"{moto_server}/moto-api/reset-auth", content=b"0", trust_env=False).json()
    try:
        with pytest.raises(ServerError) as err:
            store.put("rec1", "take.wav", b"x")
        health = store.check()
    finally:
        httpx.post(f"{moto_server}/moto-api/reset-auth",
                   content=previous["PREVIOUS_INITIAL_NO_AUTH_ACTION_COUNT"].encode(), trust_env=False)
    assert str(err.value) == (f"writing s3://{media_bucket}/team/rec1/take.wav: access denied to s3://{media_bucket}/team "
                              f"(Access Denied); the credentials in use need s3:PutObject on "
                              f"arn:aws:s3:::{media_bucket}/team/*")
    assert not health.ok and "need s3:PutObject" in health.problem


def test_s3_unreachable_endpoint_is_named_quickly(s3_env: str) -> None:
    store = S3MediaStore("team-media", "team", region=REGION, endpoint_url=UNREACHABLE)
    t0 = time.monotonic()
    with pytest.raises(BackendUnreachable) as err:
        store.put("rec1", "take.wav", b"x")
    assert time.monotonic() - t0 < 5.0
    assert str(err.value).startswith("writing s3://team-media/team/rec1/take.wav: cannot reach S3 for "
                                     "s3://team-media/team (Could not connect to the endpoint URL: "
                                     '"http://127.0.0.1:9/team-media/team/rec1/take.wav")')
    assert "AWS_ENDPOINT_URL_S3" in str(err.value)
    with pytest.raises(BackendUnreachable, match="reading s3://team-media/team/rec1/take.wav: cannot reach S3"):
        store.get("rec1", "take.wav")
    health = store.check()
    assert not health.ok and "cannot reach S3 for s3://team-media/team" in health.problem
    assert time.monotonic() - t0 < 15.0


def test_s3_without_credentials_says_where_it_looked(s3_env: str, media_bucket: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
                "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_WEB_IDENTITY_TOKEN_FILE"):
        monkeypatch.delenv(key, raising=False)
    store = S3MediaStore(media_bucket, "team", region=REGION)
    with pytest.raises(ConfigError) as err:
        store.put("rec1", "take.wav", b"x")
    assert str(err.value).startswith(f"writing s3://{media_bucket}/team/rec1/take.wav: no AWS credentials found in "
                                     "the default chain")
    with pytest.raises(ConfigError, match=f"signing a URL for s3://{media_bucket}/team/rec1/take.wav: no AWS "
                                          "credentials found"):
        store.url("rec1", "take.wav")
    assert "no AWS credentials" in store.check().problem


def test_s3_check_passes_on_a_usable_bucket_and_leaves_nothing(s3_env: str, s3: Any, media_bucket: str) -> None:
    health = S3MediaStore(media_bucket, "team/media", region=REGION).check()
    assert (health.ok, health.where, health.problem) == (True, f"s3://{media_bucket}/team/media", None)
    assert keys(s3, media_bucket) == []


def test_a_bad_aws_configuration_is_named_when_the_store_is_made(s3_env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="AWS profile 'nobody' is not configured: pick one from"):
        S3MediaStore("team-media", "team", region=REGION, profile="nobody")
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", "not a url")
    with pytest.raises(ConfigError, match=r"the S3 client for s3://team-media/team cannot be made \(Invalid endpoint: "
                                          r"not a url\): check AWS_ENDPOINT_URL_S3"):
        S3MediaStore("team-media", "team", region=REGION)


@pytest.fixture
def settings_s3(s3_env: str, media_bucket: str, tmp_path: Path) -> Iterator[Settings]:
    yield load_settings({"OMNI_STUDIO_CONFIG": "", "OMNI_STUDIO_DATA_DIR": str(tmp_path),
                         "OMNI_STUDIO_MEDIA_URL": f"s3://{media_bucket}/studio", "OMNI_STUDIO_KMS_KEY_ID": KMS_KEY})


def test_the_store_the_settings_name_works_end_to_end(settings_s3: Settings, s3: Any, media_bucket: str) -> None:
    store = open_media_store(settings_s3)
    store.put("rec1", "take.wav", b"bytes")
    assert store.get("rec1", "take.wav") == b"bytes" and store.check().ok
    assert s3.head_object(Bucket=media_bucket, Key="studio/rec1/take.wav")["SSEKMSKeyId"] == KMS_KEY
