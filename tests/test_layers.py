"""The house rules, held against the code's own imports (docs/architecture.md draws the picture).

Every `import` and `from … import` in the product's packages counts, function-level and TYPE_CHECKING
ones included. The rules:
- imports only point down: protocol → hearing → offline | emulator | services → infra → ui → pages, app;
  offline imports only protocol and hearing; emulator and services reach offline only through `offline.launch`;
- no cycles between modules;
- no `_private` module is imported from outside its own package, and nothing is loaded by name at run time
  (importlib / __import__), so every arrow is visible here;
- pages and ui never import boto3, botocore, httpx or websockets; protocol, offline, emulator and services
  never import streamlit;
- every page script is at most 150 lines;
- no product module — every tracked .py outside tests/, bench/ and scripts/ included — imports `tests`: the
  product stands on its own (tests may import the product, never the other way).

A violation fails with the file, the line and the import that breaks the rule.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from tests.test_sizes import product_files as tracked_product_files

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("protocol", "hearing", "offline", "emulator", "services", "infra", "ui", "pages")
TOP_FILES = ("app.py",)
# What each package may import of ours (besides itself). offline.launch is the engine's only door.
ALLOWED: dict[str, set[str]] = {
    "protocol": set(),
    "hearing": {"protocol"},
    "offline": {"protocol", "hearing"},
    "emulator": {"protocol", "offline.launch"},
    "services": {"protocol", "hearing", "offline.launch"},
    "infra": {"protocol", "services"},
    "ui": {"protocol", "services", "infra"},
    "pages": {"protocol", "services", "infra", "ui"},
    "app": {"protocol", "services", "infra", "ui", "pages"},
}
NO_NETWORK_CLIENTS = {"boto3", "botocore", "httpx", "websockets"}
UI_ONLY = {"streamlit", "streamlit_webrtc"}
PAGE_MAX_LINES = 150


@dataclass(frozen=True)
class Import:
    source: str  # importing module, dotted
    path: Path
    line: int
    target: str  # imported module, dotted (the longest of ours it names, or the top-level name of a library)

    def where(self) -> str:
        return f"{self.path.relative_to(self.root)}:{self.line}"

    root: Path = ROOT


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def product_files(root: Path) -> list[Path]:
    files = [p for pkg in PACKAGES for p in sorted((root / pkg).rglob("*.py"))]
    return files + [root / f for f in TOP_FILES if (root / f).exists()]


def _resolve(name: str, ours: set[str]) -> str:
    """The longest module of ours that `name` names (a.b.c → a.b when c is a function), else `name`."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        if ".".join(parts[:i]) in ours:
            return ".".join(parts[:i])
    return name


def collect(root: Path) -> tuple[list[Import], list[str]]:
    """Every import of the product's modules, and every dynamic import (as a message)."""
    files = product_files(root)
    ours = {module_name(p, root) for p in files}
    imports: list[Import] = []
    dynamic: list[str] = []
    for path in files:
        source = module_name(path, root)
        package = source if path.name == "__init__.py" else source.rpartition(".")[0]
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                # `from pkg import mod` imports the module pkg.mod when it is one of ours
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in ours else base for a in node.names]
            elif isinstance(node, ast.Call):
                fn = node.func
                name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else ""
                if name in ("import_module", "__import__"):
                    dynamic.append(f"{path.relative_to(root)}:{node.lineno}: loads a module by name ({ast.unparse(node)}); "
                                   "import it explicitly so the layer rules can see it")
            for target in targets:
                imports.append(Import(source, path, node.lineno, _resolve(target, ours), root))
    return imports, dynamic


def layer_of(module: str) -> str:
    top = module.split(".")[0]
    return "app" if top == "app" else top


def violations(root: Path = ROOT) -> list[str]:
    imports, problems = collect(root)
    ours = {module_name(p, root) for p in product_files(root)}
    graph: dict[str, set[str]] = {m: set() for m in ours}
    for imp in imports:
        src_layer, top = layer_of(imp.source), imp.target.split(".")[0]
        line = f"{imp.where()}: {imp.source} imports {imp.target}"
        if imp.target in ours:
            graph[imp.source].add(imp.target)
            dst_layer = layer_of(imp.target)
            if dst_layer != src_layer:
                allowed = ALLOWED[src_layer]
                if not any(imp.target == a or imp.target.startswith(a + ".") for a in allowed):
                    problems.append(f"{line}: {src_layer}/ may import only {', '.join(sorted(allowed)) or 'nothing of ours'}")
            private = [p for p in imp.target.split(".") if p.startswith("_") and p != "__init__"]
            if private:
                owner = imp.target.rpartition(".")[0]
                if not (imp.source == owner or imp.source.startswith(owner + ".")):
                    problems.append(f"{line}: {private[0]} is private to {owner}")
        elif top in NO_NETWORK_CLIENTS and src_layer in ("ui", "pages", "app"):
            problems.append(f"{line}: the UI never talks to the network itself; call a service")
        elif top in UI_ONLY and src_layer in ("protocol", "offline", "emulator", "services"):
            problems.append(f"{line}: {src_layer}/ is UI-free; streamlit belongs to ui/ and pages/")
    problems += [f"import cycle: {' -> '.join(c)}" for c in cycles(graph)]
    for page in sorted((root / "pages").glob("*.py")):
        n = len(page.read_text().splitlines())
        if n > PAGE_MAX_LINES:
            problems.append(f"{page.relative_to(root)}: {n} lines; a page is at most {PAGE_MAX_LINES} "
                            "(move helpers to ui/, logic to services/)")
    return problems


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan), each as a closed path."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp) + [sorted(comp)[0]])

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


# ---------------------------------------------------------------------------------------------------------
def test_the_house_keeps_its_rules():
    problems = violations()
    assert not problems, "layer rules broken:\n" + "\n".join(problems)


def _plant(tmp_path: Path, files: dict[str, str]) -> Path:
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir(parents=True, exist_ok=True)
        (tmp_path / pkg / "__init__.py").write_text("")
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_a_planted_upward_import_is_named(tmp_path):
    root = _plant(tmp_path, {"protocol/speech.py": "def f():\n    from services.backend import create_backend\n",
                             "services/backend.py": "create_backend = None\n"})
    assert violations(root) == [
        "protocol/speech.py:2: protocol.speech imports services.backend: protocol/ may import only nothing of ours"]


def test_engine_internals_private_modules_cycles_and_ui_rules_are_caught(tmp_path):
    root = _plant(tmp_path, {
        "offline/speech.py": "x = 1\n",
        "offline/launch.py": "import offline._child\n",
        "offline/_child.py": "",
        "services/a.py": "import offline.speech\nfrom services import b\n",
        "services/b.py": "from services.a import x\nimport streamlit\n",
        "infra/cli.py": "from offline import _child\nimport importlib\nimportlib.import_module('services.a')\n",
        "pages/voice.py": "import httpx\n" + "x = 1\n" * 150,
    })
    problems = violations(root)
    text = "\n".join(problems)
    assert "services/a.py:1: services.a imports offline.speech" in text  # past the launcher
    assert "infra/cli.py:1: infra.cli imports offline._child" in text
    assert "_child is private to offline" in text
    assert "infra/cli.py:3: loads a module by name" in text
    assert "services/b.py:2: services.b imports streamlit" in text
    assert "pages/voice.py:1: pages.voice imports httpx" in text
    assert "pages/voice.py: 151 lines" in text
    assert "import cycle: services.a -> services.b -> services.a" in text
    assert "offline/launch.py" not in text  # a package may use its own private modules


def imports_of_tests(root: Path = ROOT) -> dict[str, set[str]]:
    """Product file -> the modules of tests/ it imports (any import, function-level ones too)."""
    found: dict[str, set[str]] = {}
    for path in tracked_product_files(root):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
            for name in names:
                if name == "tests" or name.startswith("tests."):
                    found.setdefault(str(path.relative_to(root)), set()).add(name)
    return found


def product_imports_problems(found: dict[str, set[str]]) -> list[str]:
    return [f"{file} imports {name}: product code never imports tests/ (move what it needs into a product module, "
            "as bench/pg_cluster.py and bench/haproxy_front.py; tests may import that)"
            for file, names in sorted(found.items()) for name in sorted(names)]


def test_no_product_module_imports_tests():
    problems = product_imports_problems(imports_of_tests())
    assert not problems, "product imports tests/:\n" + "\n".join(problems)


def test_a_bench_importing_tests_is_named(tmp_path):
    import subprocess

    files = {"bench/heard.py": "def f():\n    from tests.browser_support import poll\n",
             "scripts/tool.py": "import tests.pg_support as pg\n", "app.py": "from bench.browser import poll\n",
             "tests/test_x.py": "from tests.browser_support import poll\n"}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    found = imports_of_tests(tmp_path)
    assert found == {"bench/heard.py": {"tests.browser_support"}, "scripts/tool.py": {"tests.pg_support"}}
    assert product_imports_problems(found) == [
        "bench/heard.py imports tests.browser_support: product code never imports tests/ (move what it needs into a "
        "product module, as bench/pg_cluster.py and bench/haproxy_front.py; tests may import that)",
        "scripts/tool.py imports tests.pg_support: product code never imports tests/ (move what it needs into a "
        "product module, as bench/pg_cluster.py and bench/haproxy_front.py; tests may import that)"]


VOICE_PAGE = "pages.voice"
VOICE_CLIENT = "services.speech.client"  # SpeechRun and SpeechClient: what the voice page's Speak starts
WIRE_MAX_MODULES = 6


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (the same imports the rules above read)."""
    imports, _ = collect(root)
    ours = {module_name(p, root) for p in product_files(root)}
    graph: dict[str, set[str]] = {m: set() for m in ours}
    for imp in imports:
        if imp.target in ours and imp.target != imp.source:
            graph[imp.source].add(imp.target)
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = {start}, [start]
    while todo:
        for nxt in graph[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen


def shortest_chain(graph: dict[str, set[str]], start: str, goal: str) -> list[str]:
    """The fewest modules from `start` to `goal` along imports (breadth first), both ends included."""
    came: dict[str, str | None] = {start: None}
    level = [start]
    while level and goal not in came:
        following = []
        for here in level:
            for nxt in sorted(graph[here] - came.keys()):
                came[nxt] = here
                following.append(nxt)
        level = following
    chain = [goal] if goal in came else []
    while chain and came[chain[-1]] is not None:
        chain.append(came[chain[-1]])
    return chain[::-1]


def test_a_voice_request_crosses_at_most_six_modules():
    """The modules a voice request imports, derived from the real imports from the speech client down (not
    from a list): they keep to protocol/ and services/, use no services package but speech, and each of them
    that talks to the network (the wire) is at most six modules from the voice page."""
    graph = import_graph()
    modules = reachable(graph, VOICE_CLIENT)
    imports, _ = collect(ROOT)
    wire = sorted({i.source for i in imports if i.source in modules and i.target.split(".")[0] in NO_NETWORK_CLIENTS})
    assert "services.speech.websocket" in wire, wire  # the stream itself: the derivation found the wire
    for module in sorted(modules):
        assert layer_of(module) in ("protocol", "services"), f"a voice request loads {module}"
        parts = module.split(".")
        assert parts[0] != "services" or len(parts) == 2 or parts[1] == "speech", \
            f"a voice request loads {module}, another services package than speech"
    for module in wire:
        chain = shortest_chain(graph, VOICE_PAGE, module)
        assert chain, f"{VOICE_PAGE} does not reach {module}"
        assert len(chain) <= WIRE_MAX_MODULES, f"a voice request crosses {len(chain)} modules: {' -> '.join(chain)}"
