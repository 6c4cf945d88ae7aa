"""Size limits of the product's code: no module over 400 lines, no function over 80, no class over 300 (issue #20).

The product is every tracked .py file outside tests/ — `git ls-files '*.py'` from the repository's root, so
bench/, scripts/, serve.py and any new folder count the moment they are added. A module's size is its line
count; a function's or class's lines run from its `def`/`class` (decorators not included) to its last line
(read with `ast`). A failure names each offender as file (or file:name) and its line count.

A module over the cap that someone is splitting right now waits in PENDING; that set only shrinks: each entry
must still exist and still be over the cap, so the split that brings one under it also removes it here.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE_MAX_LINES = 400
FUNCTION_MAX_LINES = 80
CLASS_MAX_LINES = 300
MIN_PRODUCT_FILES = 150  # fewer means the listing went wrong, not that the product shrank

# Modules over MODULE_MAX_LINES being split by other changes in flight. Remove an entry when its split lands
# (the test says so); never add one — a module that grows past the cap is split in the change that grows it.
PENDING: set[str] = set()


def tracked_python(root: Path = ROOT) -> list[str]:
    """Every tracked .py file, relative to `root` (git's own listing: untracked scratch files do not count)."""
    out = subprocess.run(["git", "ls-files", "-z", "--", "*.py"], cwd=root, capture_output=True, check=True)
    return sorted(p for p in out.stdout.decode().split("\0") if p)


def is_product(relative: str) -> bool:
    return Path(relative).parts[0] != "tests"


def product_files(root: Path = ROOT) -> list[Path]:
    """The product's tracked modules (a file deleted in the working tree but not yet in git is skipped)."""
    return [root / p for p in tracked_python(root) if is_product(p) and (root / p).is_file()]


def line_count(path: Path) -> int:
    return len(path.read_text().splitlines())


def oversized_modules(root: Path = ROOT) -> dict[str, int]:
    """file -> its line count, for every product module over MODULE_MAX_LINES."""
    counts = {str(p.relative_to(root)): line_count(p) for p in product_files(root)}
    return {name: n for name, n in counts.items() if n > MODULE_MAX_LINES}


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


def pending_problems(over: dict[str, int], pending: set[str], root: Path = ROOT) -> list[str]:
    """What is wrong with the over-the-cap modules given the PENDING set: a module over the cap that is not
    pending, and a pending entry that is gone or no longer over the cap (remove it: the set only shrinks)."""
    problems = [f"{name} is {n} lines; a module is at most {MODULE_MAX_LINES} (split it along a seam)"
                for name, n in sorted(over.items()) if name not in pending]
    for name in sorted(pending - over.keys()):
        if not (root / name).is_file():
            problems.append(f"{name} is in PENDING but no longer exists: remove it from PENDING")
        else:
            problems.append(f"{name} is {line_count(root / name)} lines now, within the cap: remove it from PENDING")
    return problems


# ---------------------------------------------------------------------------------------------------------
def test_the_scan_is_every_tracked_product_module():
    scanned = {str(p.relative_to(ROOT)) for p in product_files()}
    # git's listing of every tracked file, filtered here by suffix (not by a pathspec): none escapes the scan
    out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode()
    tracked = {p for p in out.split("\0") if p.endswith(".py") and not p.startswith("tests/") and (ROOT / p).is_file()}
    assert scanned == tracked, f"not scanned: {sorted(tracked - scanned)}; scanned but not product: {sorted(scanned - tracked)}"
    assert len(scanned) > MIN_PRODUCT_FILES, f"only {len(scanned)} product modules found: is git's listing broken?"
    folders = {Path(p).parts[0] for p in scanned if len(Path(p).parts) > 1}
    assert {"bench", "scripts", "infra", "emulator", "services", "offline", "protocol", "ui", "pages"} <= folders
    assert "app.py" in scanned and not any(p.startswith("tests/") for p in scanned)


def test_no_module_is_over_the_cap_and_pending_only_shrinks():
    problems = pending_problems(oversized_modules(), PENDING)
    assert not problems, "module sizes:\n" + "\n".join(problems)


def test_no_function_or_class_is_over_its_size_limit():
    problems = oversized()
    assert not problems, "too long:\n" + "\n".join(problems)


def _repository(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    return tmp_path


def test_an_oversized_function_and_class_are_named(tmp_path: Path):
    body = "".join(f"    x{i} = {i}\n" for i in range(80))
    root = _repository(tmp_path, {
        "services/big.py": f"def long():\n{body}\n\ndef short():\n    return 1\n\n\nclass Large:\n" + "    y = 1\n" * 300,
        "tests/test_big.py": f"def long():\n{body}",  # tests do not count
    })
    assert oversized(root) == [
        "services/big.py:long is 81 lines; a function is at most 80",
        "services/big.py:Large is 301 lines; a class is at most 300",
    ]


def test_a_module_over_the_cap_and_a_stale_pending_entry_are_named(tmp_path: Path):
    root = _repository(tmp_path, {
        "newfolder/big.py": "x = 1\n" * 401,  # a folder nobody listed still counts
        "bench/waiting.py": "x = 1\n" * 450,
        "infra/split.py": "x = 1\n" * 300,
        "tests/test_huge.py": "x = 1\n" * 900,
    })
    (root / "scratch.py").write_text("x = 1\n" * 500)  # not tracked: not product
    over = oversized_modules(root)
    assert over == {"newfolder/big.py": 401, "bench/waiting.py": 450}
    assert pending_problems(over, {"bench/waiting.py", "infra/split.py", "infra/gone.py"}, root) == [
        "newfolder/big.py is 401 lines; a module is at most 400 (split it along a seam)",
        "infra/gone.py is in PENDING but no longer exists: remove it from PENDING",
        "infra/split.py is 300 lines now, within the cap: remove it from PENDING",
    ]
