"""The packages a generated script needs (services/code/packages.py): read from its imports, pinned as the studio
pins them, and a script that imports anything else is a generator bug (every test that generates Python checks it:
tests/code_support.py)."""

from __future__ import annotations

import pytest

from services.code.packages import PINS, UnpinnedImport, needs
from tests.code_support import ROOT


def test_every_pin_is_the_studios_own() -> None:
    pinned = "\n" + "\n".join((ROOT / f).read_text() for f in ("requirements.txt", "requirements-dev.txt"))
    for module, pin in PINS.items():
        assert f"\n{pin}\n" in pinned, (module, pin)


def test_needs_reads_the_imports_in_order_and_skips_the_standard_library() -> None:
    text = ("import base64\nimport os\nimport boto3\nfrom aws_sdk_sagemaker_runtime_http2.client import X\n"
            "from smithy_http.aio.crt import Y\nimport json, wave\nfrom botocore.config import Config\n")
    assert needs(text) == ("boto3==1.44.5", "aws-sdk-sagemaker-runtime-http2[awscrt]==0.12.0")
    assert needs("import json\nimport wave\n") == ()
    with pytest.raises(UnpinnedImport, match="requests"):
        needs("import requests\n")


def test_a_file_beside_the_script_is_named_by_a_constant_python_and_sh_accept() -> None:
    from services.code.literals import const

    assert [const(n) for n in ("reference-1.png", "0000.wav", "talk.wav", "ünï.wav", ".wav")] == \
        ["REFERENCE_1", "FILE_0000", "TALK", "FILE__N_", "REFERENCE"]
    for name in ("0000.wav", "ünï.wav"):
        compile(f"{const(name)} = 1", "<const>", "exec")
