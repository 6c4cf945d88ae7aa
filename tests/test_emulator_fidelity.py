"""Clients that know nothing of the emulator talk to it unchanged (issue 24): what the published sample scripts
ran into, each checked with the real client against the real emulator.

- TLS: the certificate names the AWS hosts the emulator stands in for (the HTTP/2 SDK connects to
  `runtime.sagemaker.<region>.amazonaws.com:8443` and checks that name), for us-east-1 and the region it serves.
- Voices: the voice endpoint accepts every speaker and language of its model (Qwen3-TTS CustomVoice), each
  speaker a distinct rendering of the engine's Piper voice.
- S3: a PutObject whose ContentType is a form type keeps every byte (moto form-parsed it to 0 bytes), so a
  sample's multipart video request runs; an empty async input is refused at submission.
"""

from __future__ import annotations

import socket
import ssl
from pathlib import Path
from typing import Any

import pytest

from emulator.tls import aws_host_names

pytest.register_assert_rewrite("tests.emulator_support")  # its helpers assert; rewrite them too
from tests.emulator_support import EmulatorHandle, running_emulator

pytest_plugins = ["tests.emulator_support"]  # the emulator fixtures, registered once per session


# --------------------------------------------------------------------------------------------------
# TLS: the AWS host names
def _handshake(https_url: str, ca_file: Path, server_name: str) -> dict[str, Any]:
    """A TLS handshake with the emulator's listener, as a client that asked for `server_name` makes it."""
    port = int(https_url.rsplit(":", 1)[1])
    context = ssl.create_default_context(cafile=str(ca_file))  # host-name check on, as every AWS client has it
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=server_name) as tls:
            return tls.getpeercert()


def test_the_certificate_names_the_aws_hosts_clients_connect_to(emulator: EmulatorHandle) -> None:
    for name in ("runtime.sagemaker.us-east-1.amazonaws.com", "api.sagemaker.us-east-1.amazonaws.com",
                 "s3.amazonaws.com", "my-bucket.s3.amazonaws.com", "my-bucket.s3.us-east-1.amazonaws.com",
                 "sts.amazonaws.com", "iam.amazonaws.com", "monitoring.us-east-1.amazonaws.com",
                 "api.pricing.us-east-1.amazonaws.com", "localhost"):
        assert _handshake(emulator.https_url, emulator.ca_file, name)["subjectAltName"]
    # Still a real check: a host the emulator does not stand in for fails it.
    with pytest.raises(ssl.SSLCertVerificationError, match="Hostname mismatch"):
        _handshake(emulator.https_url, emulator.ca_file, "runtime.sagemaker.amazonaws.com.example.org")


def test_the_certificate_names_the_region_the_emulator_was_started_for(
    engine_url: str, moto_server: str, tmp_path: Path
) -> None:
    with running_emulator(engine_url, moto_server, tmp_path, config={"region": "eu-west-2"}) as handle:
        assert handle.region == "eu-west-2"
        for name in ("runtime.sagemaker.eu-west-2.amazonaws.com", "scheduler.eu-west-2.amazonaws.com",
                     "runtime.sagemaker.us-east-1.amazonaws.com"):  # us-east-1 always: global services live there
            assert _handshake(handle.https_url, handle.ca_file, name)
        with pytest.raises(ssl.SSLCertVerificationError):
            _handshake(handle.https_url, handle.ca_file, "runtime.sagemaker.ap-south-2.amazonaws.com")


def test_aws_host_names_lists_each_service_once_per_region() -> None:
    names = aws_host_names("eu-central-1")
    assert len(names) == len(set(names))
    for service in ("runtime.sagemaker", "api.sagemaker", "sagemaker", "s3", "sts", "servicequotas", "scheduler",
                    "application-autoscaling", "monitoring"):
        assert f"{service}.eu-central-1.amazonaws.com" in names
    assert {"s3.amazonaws.com", "*.s3.amazonaws.com", "*.s3.eu-central-1.amazonaws.com", "iam.amazonaws.com",
            "sts.amazonaws.com", "api.pricing.us-east-1.amazonaws.com"} <= set(names)
