"""Size limits of the product's code: no function over 80 lines, no class over 300 (issue #20).

Every .py file of the product counts (protocol, offline, emulator, services, infra, ui, pages, scripts,
bench and app.py; tests do not), read with `ast`: a function's or class's lines run from its `def`/`class`
(decorators not included) to its last line. A failure names each offender as file:name and its line count.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT_DIRS = ("protocol", "offline", "emulator", "services", "infra", "ui", "pages", "scripts", "bench")
PRODUCT_FILES = ("app.py",)
FUNCTION_MAX_LINES = 80
CLASS_MAX_LINES = 300


def product_files(root: Path = ROOT) -> list[Path]:
    files = [p for d in PRODUCT_DIRS for p in sorted((root / d).rglob("*.py"))]
    return files + [root / f for f in PRODUCT_FILES if (root / f).exists()]


def oversized(root: Path = ROOT) -> list[str]:
    """'file:name is N lines (at most M)' for every function and class over its limit."""
    found: list[str] = []
    for path in product_files(root):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                limit, kind = FUNCTION_MAX_LINES, "function"
            elif isinstance(node, ast.ClassDef):
                limit, kind = CLASS_MAX_LINES, "class"
            else:
                continue
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > limit:
                found.append(f"{path.relative_to(root)}:{node.name} is {lines} lines; a {kind} is at most {limit}")
    return found


def test_no_function_or_class_is_over_its_size_limit():
    problems = oversized()
    assert not problems, "too long:\n" + "\n".join(problems)


def test_an_oversized_function_and_class_are_named(tmp_path: Path):
    (tmp_path / "services").mkdir()
    body = "".join(f"    x{i} = {i}\n" for i in range(80))
    (tmp_path / "services" / "big.py").write_text(
        f"def long():\n{body}\n\ndef short():\n    return 1\n\n\nclass Large:\n" + "    y = 1\n" * 300)
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_big.py").write_text(f"def long():\n{body}")  # tests do not count
    assert oversized(tmp_path) == [
        "services/big.py:long is 81 lines; a function is at most 80",
        "services/big.py:Large is 301 lines; a class is at most 300",
    ]
