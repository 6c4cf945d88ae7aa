"""SageMaker GPU instance types: how many GPUs, which, and how much GPU memory — and whether a model fits.

Figures from AWS's accelerated-computing instance pages (EC2 G4dn, G5, G6, G6e, P4d/P4de, P5; the ml. types
carry the same GPUs). The fit rule, stated once: vLLM reserves `GPU_MEMORY_UTILIZATION` (its default, 0.9) of
every GPU, and a model spread over several GPUs (tensor parallel) has their sum; a model fits when its
catalog need (protocol/catalog.py) is at most that, and when it wants bf16, the GPU has it (the T4 has not).
"""

from __future__ import annotations

from dataclasses import dataclass

from protocol.catalog import Model

GPU_MEMORY_UTILIZATION = 0.9  # vLLM's --gpu-memory-utilization default


@dataclass(frozen=True)
class Instance:
    type: str
    gpus: int
    gpu: str
    gpu_gb: int  # per GPU
    bf16: bool = True

    @property
    def total_gb(self) -> int:
        return self.gpus * self.gpu_gb

    @property
    def usable_gb(self) -> float:
        return round(self.total_gb * GPU_MEMORY_UTILIZATION, 1)

    def describe(self) -> str:
        """`1× L4 24 GB`"""
        return f"{self.gpus}× {self.gpu} {self.total_gb} GB" if self.gpus == 1 else \
            f"{self.gpus}× {self.gpu} {self.total_gb} GB ({self.gpu_gb} GB each)"


def _family(prefix: str, gpu: str, gpu_gb: int, sizes: dict[str, int], bf16: bool = True) -> list[Instance]:
    return [Instance(f"ml.{prefix}.{size}", n, gpu, gpu_gb, bf16) for size, n in sizes.items()]


_ONE = {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 1}
INSTANCES: dict[str, Instance] = {i.type: i for i in [
    *_family("g4dn", "T4", 16, {**_ONE, "12xlarge": 4}, bf16=False),
    *_family("g5", "A10G", 24, {**_ONE, "12xlarge": 4, "24xlarge": 4, "48xlarge": 8}),
    *_family("g6", "L4", 24, {**_ONE, "12xlarge": 4, "24xlarge": 4, "48xlarge": 8}),
    *_family("g6e", "L40S", 48, {**_ONE, "12xlarge": 4, "24xlarge": 4, "48xlarge": 8}),
    Instance("ml.p4d.24xlarge", 8, "A100", 40),
    Instance("ml.p4de.24xlarge", 8, "A100", 80),
    Instance("ml.p5.48xlarge", 8, "H100", 80),
]}


def instance(instance_type: str) -> Instance | None:
    return INSTANCES.get(instance_type)


def misfit(model: Model, instance_type: str) -> str | None:
    """Why `model` cannot be served on `instance_type`, or None when it fits (or either is unknown)."""
    inst = INSTANCES.get(instance_type)
    if inst is None:
        return None
    if model.gpu_need_gb > inst.usable_gb:
        return (f"{model.id} needs ≈ {model.gpu_need_gb:g} GB of GPU memory; {instance_type} has "
                f"{inst.describe()}, of which vLLM uses {inst.usable_gb:g} GB")
    if model.needs_bf16 and not inst.bf16:
        return f"{instance_type} ({inst.describe()}) has no bf16, which {model.id} needs"
    return None


def fitting(model: Model, limit: int = 4) -> list[str]:
    """The smallest instance types that fit `model`, fewest GPUs and least memory first."""
    ok = [i for i in INSTANCES.values() if misfit(model, i.type) is None]
    order = {t: n for n, t in enumerate(INSTANCES)}  # xlarge before 2xlarge …: the listing's order
    ok.sort(key=lambda i: (i.gpus, i.total_gb, order[i.type]))
    seen: set[tuple[int, str]] = set()
    out = []
    for i in ok:  # one size per GPU kind and count: ml.g6.xlarge stands for g6.2xlarge … g6.16xlarge
        if (i.gpus, i.gpu) not in seen:
            seen.add((i.gpus, i.gpu))
            out.append(i.type)
    return out[:limit]


def fit_line(model: Model | None, model_id: str | None = None) -> str:
    """`needs ≈ 5.1 GB; fits on ml.g4dn.xlarge, ml.g5.xlarge, …` or what is unknown."""
    if model is None:
        return f"GPU memory unknown: {model_id or 'this model'} is not in the studio's catalog"
    return f"needs ≈ {model.gpu_need_gb:g} GB; fits on {', '.join(fitting(model)) or 'no single instance type listed'}"
