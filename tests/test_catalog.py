"""The catalog (protocol/catalog.py) is the one place the model families are listed, and its figures hold.

A list of families written anywhere else in the product — a tuple, list, set or `Literal` naming two or more
of them, or a table of plain values (strings, numbers) keyed by two or more of them — fails here, naming the
file and line: such a fact belongs in the catalog, where a new family adds it once. A table that maps a family
to code (its request class, its runner) is dispatch, not a fact, and stays beside that code.
"""

from __future__ import annotations

import ast
import typing

from protocol import catalog, instances
from protocol.sagemaker import ROLES, Role
from tests.test_layers import ROOT, product_files

FAMILIES = set(catalog.FAMILY_NAMES)
HOME = ROOT / "protocol" / "catalog.py"


def _names(elts: list[ast.expr | None]) -> list[str]:
    return [e.value for e in elts if isinstance(e, ast.Constant) and e.value in FAMILIES]


def _plain(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant):
        return True
    if isinstance(node, (ast.Tuple, ast.List)):
        return all(_plain(e) for e in node.elts)
    return isinstance(node, ast.UnaryOp) and _plain(node.operand)


def family_lists(tree: ast.AST) -> list[tuple[int, str]]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(_names(node.elts)) >= 2:
            found.append((node.lineno, "a list of " + ", ".join(_names(node.elts))))
        elif isinstance(node, ast.Dict) and len(_names(node.keys)) >= 2 and all(_plain(v) for v in node.values):
            found.append((node.lineno, "a table of plain values keyed by " + ", ".join(_names(node.keys))))
    return found


def test_no_family_list_outside_the_catalog():
    problems = []
    for path in product_files(ROOT):
        if path == HOME:
            continue
        for line, what in family_lists(ast.parse(path.read_text(), str(path))):
            problems.append(f"{path.relative_to(ROOT)}:{line}: {what} — derive it from protocol/catalog.py")
    assert not problems, "\n".join(problems)


def test_the_scan_finds_what_it_forbids():
    src = 'A = ("voice", "image")\nB: Literal["image", "video"]\nC = {"voice": 1, "video": 2}\nD = {"voice": f, "image": g}\n'
    assert sorted(line for line, _ in family_lists(ast.parse(src))) == [1, 2, 3]


def test_roles_modalities_and_pages_derive_from_the_catalog():
    from services.eval.spec import Modality as EvalModality
    from services import families
    from services.load.plan import MODALITIES
    from services.settings import PageName

    assert ROLES == catalog.FAMILY_NAMES == typing.get_args(Role)
    # Evaluations cover the families whose module registers an evaluation part (services/eval/<family>.py).
    assert typing.get_args(EvalModality) == families.having("evaluation") and "sound" in families.having("evaluation")
    # Load sweeps: the families whose module registers a load part (services/load/<family>.py), in catalog order.
    assert MODALITIES == families.having("load") and {"voice", "image", "video", "listen"} <= set(MODALITIES)
    paged = {f.name for f in catalog.FAMILIES if f.page}
    assert set(typing.get_args(PageName)) == set(catalog.PAGE_NAMES) >= paged
    for page in catalog.PAGES:
        assert (ROOT / page.script).is_file(), page.script


def test_every_family_default_model_is_in_the_catalog_and_fits_its_default_pool():
    for fam in catalog.FAMILIES:
        model = catalog.model(fam.default_model)
        assert model is not None and model.family == fam.name
        for instance_type in fam.default_pool:
            assert instance_type in instances.INSTANCES, instance_type
            assert instances.misfit(model, instance_type) is None, (model.id, instance_type)


def test_gpu_need_follows_the_stated_rule():
    # 1.7B parameters at bf16 = 3.4 GB of weights; × 1.2 = 4.08, + 1 GB context = 5.08 → 5.1 GB (rounded up).
    assert catalog.computed_need_gb(3.4) == 5.1
    assert catalog.model("Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice").gpu_need_gb == 5.1
    # 16.0 GB (FLUX.2-klein-4B with its text encoder) → 19.2 + 1 = 20.2 GB.
    assert catalog.model("black-forest-labs/FLUX.2-klein-4B").gpu_need_gb == 20.2


def test_fit_rule_against_hand_computed_instances():
    wan = catalog.model("Wan-AI/Wan2.1-VACE-1.3B-diffusers")
    assert wan.gpu_need_gb == 18.2  # 14.3 × 1.2 + 1 = 18.16 → 18.2
    # 1× T4 16 GB, vLLM uses 0.9 of it: 14.4 GB < 18.2 GB.
    assert instances.misfit(wan, "ml.g4dn.xlarge") == (
        "Wan-AI/Wan2.1-VACE-1.3B-diffusers needs ≈ 18.2 GB of GPU memory; ml.g4dn.xlarge has 1× T4 16 GB, "
        "of which vLLM uses 14.4 GB")
    assert instances.misfit(wan, "ml.g6.xlarge") is None  # 1× L4 24 GB → 21.6 GB usable
    assert instances.misfit(wan, "ml.g4dn.12xlarge") is not None  # 4× T4 = 64 GB holds it, but no bf16
    assert instances.INSTANCES["ml.g6e.12xlarge"].total_gb == 192  # 4× L40S 48 GB
    assert instances.fitting(wan)[:3] == ["ml.g5.xlarge", "ml.g6.xlarge", "ml.g6e.xlarge"]
    assert instances.misfit(wan, "ml.unknown.xlarge") is None  # an unlisted type is not refused
    assert instances.fit_line(None, "acme/new-model") == (
        "GPU memory unknown: acme/new-model is not in the studio's catalog")


def test_model_lookup_is_case_insensitive_and_none_for_unknown():
    assert catalog.model("qwen/qwen3-tts-12hz-1.7b-base").id == "Qwen/Qwen3-TTS-12Hz-1.7B-Base"
    assert catalog.model("acme/unknown") is None and catalog.model(None) is None


def test_listen_is_an_opt_in_family_with_its_page():
    from infra.model import DeployOptions, deploy_command
    from protocol.sagemaker import DEFAULT_ROLES

    listen = catalog.family("listen")
    assert listen.opt_in and listen.page and listen.serving == "bidirectional" and listen.records == "transcripts"
    assert listen.endpoint_kind == "realtime" and listen.price_unit_size == 3600
    assert DEFAULT_ROLES == tuple(f.name for f in catalog.FAMILIES if not f.opt_in) and "listen" not in DEFAULT_ROLES
    assert tuple(DeployOptions().roles) == DEFAULT_ROLES  # `infra deploy` with no endpoint named
    page = next(p for p in catalog.PAGES if p.name == "listen")  # after the other family pages, before the tools
    assert catalog.PAGE_NAMES[:4] == ("voice", "image", "video", "listen")
    assert (page.title, page.min_role, page.script) == ("Listen", "viewer", "pages/listen.py")
    voxtral = catalog.model(listen.default_model)
    assert voxtral.needs_bf16 and voxtral.gpu_need_gb == 10.6  # 8.0 GB × 1.2 + 1 = 10.6
    assert instances.misfit(voxtral, "ml.g4dn.xlarge") is not None  # the T4 has no bf16
    assert deploy_command(DeployOptions(roles=(*DEFAULT_ROLES, "listen"))) == "python -m infra deploy --with listen"
    assert deploy_command(DeployOptions(roles=("voice", "listen"))) == "python -m infra deploy voice listen"


def test_sweeps_and_evaluations_take_listen_and_refuse_what_does_not_exist():
    import pytest

    from protocol.errors import InvalidInput
    from services.eval.spec import parse_spec
    from services.load.plan import check_modality

    assert check_modality("listen") == "listen"  # load sweeps have listen's code
    with pytest.raises(InvalidInput, match=r"unknown modality 'audio'.*: a sweep loads voice, image, video, listen"):
        check_modality("audio")
    with pytest.raises(InvalidInput, match=r"modality must be voice, image, video, listen or sound, not 'audio'"):
        parse_spec({"name": "x", "modality": "audio", "prompts": ["a"], "variants": [{"label": "a"}]})
    with pytest.raises(InvalidInput, match=r"a listen evaluation names recordings, not prompts"):
        parse_spec({"name": "x", "modality": "listen", "prompts": ["a"], "variants": [{"label": "a"}]})


def test_omni_is_an_opt_in_multi_gpu_family_without_a_page():
    fam = catalog.family("omni")
    assert fam.opt_in and not fam.page and "omni" not in catalog.PAGE_NAMES
    assert "omni" not in catalog.DEFAULT_FAMILY_NAMES
    assert fam.serving == "bidirectional" and fam.routes == ("/v1/realtime", "/v1/chat/completions")
    assert fam.unit == fam.price_unit == "conversation turn"
    qwen = catalog.model(fam.default_model)
    assert qwen.id == "Qwen/Qwen3-Omni-30B-A3B-Instruct" and qwen.licence == "Apache-2.0"
    assert qwen.weights_gb == 70.0 and qwen.gpu_need_gb == 85.0  # 35B × 2 bytes; 70 × 1.2 + 1 = 85
    assert "model card" in qwen.source and "computed" in qwen.source
    # One GPU of any kind is too small (the largest single one, an 80 GB A100/H100, gives vLLM 72 GB).
    for single in ("ml.g6.xlarge", "ml.g6e.xlarge", "ml.g5.xlarge", "ml.g6e.2xlarge"):
        assert instances.misfit(qwen, single) is not None, single
    assert instances.misfit(qwen, "ml.g6e.12xlarge") is None  # 192 GB × 0.9 = 172.8 GB
    assert instances.misfit(qwen, "ml.g5.12xlarge") is None  # 4× A10G 96 GB × 0.9 = 86.4 GB ≥ 85 GB
    assert instances.misfit(qwen, "ml.g6.8xlarge") is not None  # 1× L4: 21.6 GB
    fitting = instances.fitting(qwen)
    assert fitting and all(instances.INSTANCES[t].gpus > 1 for t in fitting), fitting


# ---- a family's name is compared only in its own code (services/families/<family>.py and what it calls home) ------
def family_comparisons(tree: ast.AST) -> list[tuple[int, str]]:
    """`x == "listen"`, `x in ("voice", …)`, `"video" in roles`, `case "image":` — each with the name compared."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Compare):
            for op, right in zip(node.ops, node.comparators):
                names = [side.value for side in (node.left, right) if isinstance(side, ast.Constant)
                         and side.value in FAMILIES]
                if isinstance(op, ast.In | ast.NotIn) and isinstance(right, ast.Tuple | ast.List | ast.Set):
                    names += _names(right.elts)
                found += [(node.lineno, name) for name in names]
        elif isinstance(node, ast.match_case):
            cases = node.pattern.patterns if isinstance(node.pattern, ast.MatchOr) else [node.pattern]
            found += [(node.pattern.lineno, c.value.value) for c in cases if isinstance(c, ast.MatchValue)
                      and isinstance(c.value, ast.Constant) and c.value.value in FAMILIES]
    return found


def own_code(path: str, name: str) -> bool:
    """A path named for the family (a folder or a module: offline/listen/, services/eval/voice.py), or under a
    folder its module calls home (services/speech for voice)."""
    from services import families

    parts = path.removesuffix(".py").split("/")
    return name in parts or any(path.startswith(home + "/") for home in families.code(name).home)


def test_no_family_name_is_compared_outside_its_own_code():
    problems = []
    for path in product_files(ROOT):
        rel = str(path.relative_to(ROOT))
        for line, name in family_comparisons(ast.parse(path.read_text(), rel)):
            if not own_code(rel, name):
                problems.append(f"{rel}:{line}: compares with the family name {name!r} — ask its part in "
                                f"services/families/{name}.py (or a rule of the catalog) instead")
    assert not problems, "\n".join(problems)


def test_the_comparison_scan_finds_what_it_forbids():
    src = ('if fam == "listen": pass\nif m in ("voice", "image"): pass\nx = "video" in roles\n'
           'match f:\n    case "sound" | "omni":\n        pass\nif kind == "server": pass\n')
    assert sorted(family_comparisons(ast.parse(src))) == [
        (1, "listen"), (2, "image"), (2, "voice"), (3, "video"), (5, "omni"), (5, "sound")]
    assert own_code("services/eval/voice.py", "voice") and own_code("services/speech/client.py", "voice")
    assert own_code("offline/listen/whisper.py", "listen") and not own_code("infra/status.py", "voice")
