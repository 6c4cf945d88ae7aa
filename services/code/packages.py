"""The packages a generated script imports, pinned as the studio pins them (requirements.txt and, for the openai
SDK the scripts use, requirements-dev.txt; tests/test_code_packages.py holds the two to each other).

    needs(code_text)   # ("openai==3.63.0",) for an image's Python; () for a script of the standard library only
"""

from __future__ import annotations

import ast
import sys

# A top-level module a script may import → what `pip install` needs for it. The HTTP/2 SDK brings smithy_* with it.
PINS = {
    "openai": "openai==3.63.0",
    "httpx": "httpx==0.28.1",
    "websockets": "websockets==17.4",
    "av": "av==19.0.2",
    "numpy": "numpy==2.5.5",
    "urllib3": "urllib3==2.8.0",
    "boto3": "boto3==1.44.5",
    "botocore": "boto3==1.44.5",
    "aws_sdk_sagemaker_runtime_http2": "aws-sdk-sagemaker-runtime-http2[awscrt]==0.12.0",
    "smithy_aws_core": "aws-sdk-sagemaker-runtime-http2[awscrt]==0.12.0",
    "smithy_core": "aws-sdk-sagemaker-runtime-http2[awscrt]==0.12.0",
    "smithy_http": "aws-sdk-sagemaker-runtime-http2[awscrt]==0.12.0",
}


class UnpinnedImport(ValueError):
    """A script imports a package the studio does not pin: a generator bug (the tests run every form)."""


def needs(python_text: str) -> tuple[str, ...]:
    """The pins `python_text` needs, in first-import order; the standard library needs none."""
    pins: list[str] = []
    for node in ast.walk(ast.parse(python_text)):
        names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                 else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
        for name in names:
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top == "__future__":
                continue
            if top not in PINS:
                raise UnpinnedImport(f"the generated code imports {top}, which the studio does not pin")
            if PINS[top] not in pins:
                pins.append(PINS[top])
    return tuple(pins)
