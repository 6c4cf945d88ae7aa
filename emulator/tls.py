"""A throw-away certificate authority and a loopback server certificate, made at start-up.

The HTTP/2 SDK (CRT transport) only speaks HTTP/2 over TLS, so the emulator serves its bidirectional
route on TLS with a certificate its own CA signed. Clients trust the CA file (AWS_CA_BUNDLE, or a CRT
transport built from it); nothing is ever added to this machine's trust store.

The certificate names `localhost`, `127.0.0.1` and the AWS host names the emulator stands in for
(`aws_host_names`), so a client that connects to `runtime.sagemaker.<region>.amazonaws.com` — where a private
network namespace resolves that name to the emulator — passes its host-name check unchanged (the HTTP/2 SDK
reads only the system CA bundle and has no endpoint setting a sample script would use).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from emulator.pricing import PRICE_LIST_REGIONS
from protocol.sagemaker import DEFAULT_REGION



def aws_host_names(region: str) -> list[str]:
    """The AWS host names a client in `region` may call that the emulator stands in for (its own and moto's).

    A certificate wildcard covers one label only (`*.amazonaws.com` does not match
    `runtime.sagemaker.us-east-1.amazonaws.com`), so each name is listed; the two `*.s3` names are S3's
    virtual-hosted bucket addresses. Also what a private network namespace writes into /etc/hosts (the
    wildcards aside)."""
    regional = [
        f"runtime.sagemaker.{region}.amazonaws.com",  # InvokeEndpoint*, and the HTTP/2 stream on :8443
        f"api.sagemaker.{region}.amazonaws.com",
        f"sagemaker.{region}.amazonaws.com",
        f"s3.{region}.amazonaws.com",
        f"*.s3.{region}.amazonaws.com",
        f"sts.{region}.amazonaws.com",
        f"servicequotas.{region}.amazonaws.com",
        f"scheduler.{region}.amazonaws.com",
        f"application-autoscaling.{region}.amazonaws.com",
        f"monitoring.{region}.amazonaws.com",  # CloudWatch
    ]
    global_names = [
        "s3.amazonaws.com", "*.s3.amazonaws.com", "sts.amazonaws.com", "iam.amazonaws.com",
        *(f"api.pricing.{r}.amazonaws.com" for r in PRICE_LIST_REGIONS),  # Price List's own regions, whatever `region`
    ]
    return list(dict.fromkeys(regional + global_names))


def _server_names(regions: Iterable[str]) -> list[str]:
    names = ["localhost"]
    for region in dict.fromkeys([DEFAULT_REGION, *regions]):
        names += aws_host_names(region)
    return list(dict.fromkeys(names))


@dataclass(frozen=True)
class TlsFiles:
    ca_file: Path  # PEM: the CA certificate clients must trust
    cert_file: Path  # PEM: the server certificate (localhost, 127.0.0.1 and aws_host_names)
    key_file: Path  # PEM: the server's private key (never leaves the state directory)


def _name(common_name: str) -> x509.Name:
    return x509.Name([
        x509.NameAttribute(NameOID.ORGANIZATION_NAME, "Omni Studio local SageMaker emulator"),
        x509.NameAttribute(NameOID.COMMON_NAME, common_name),
    ])


def make_test_pki(directory: Path, *, regions: Iterable[str] = (), valid_days: int = 7) -> TlsFiles:
    """Write a fresh CA and a server certificate into `directory`: for localhost, 127.0.0.1 and the AWS host
    names of us-east-1 and of each of `regions`."""
    directory.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)  # tolerate small clock skew
    until = now + dt.timedelta(days=valid_days)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("Omni Studio emulator test CA")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True, content_commitment=False,
                key_encipherment=False, data_encipherment=False, key_agreement=False,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )

    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName([
                *(x509.DNSName(name) for name in _server_names(regions)),
                x509.IPAddress(ipaddress.IPv4Address("127.0.0.1")),
            ]),
            critical=False,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )

    files = TlsFiles(directory / "emulator-ca.pem", directory / "emulator-server.pem", directory / "emulator-server.key")
    files.ca_file.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))
    files.cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    files.key_file.touch(mode=0o600)
    files.key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return files
