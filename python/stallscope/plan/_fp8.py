"""What an FP8 recipe adds to a layer beyond its GEMMs' FP8 rate: the casts of GEMM inputs and
weights, and the rate of block-scaled GEMM kernels.

Recipes (``Stack.fp8_recipe``; figures and sources in ``plan/data/efficiency.json``
``fp8_recipes``):

* ``delayed`` (Transformer Engine): scales from an amax history; the norms and the activation
  write their FP8 outputs themselves, so only the projection's input is cast in the forward.
* ``current`` (Transformer Engine's per-tensor current scaling) and ``dynamic`` (torchao):
  each tensor's scale from its own amax, so all four forward inputs are cast, each read once
  more for its amax.
* ``mxfp8`` (Transformer Engine, Blackwell): an E8M0 scale per 32 elements, computed inside the
  cast (no amax pass); each GEMM input is quantized in both layouts, row-wise and column-wise
  (the scales run along the reduced dimension). The activation writes its MXFP8 output itself;
  the norms write 16 bit and a cast follows. Its GEMM kernels run slower than per-tensor FP8's.

A cast reads 16 bit and writes FP8; where the GPU's FP8 GEMMs take only the TN layout (Hopper)
a per-tensor cast also writes the transpose the backward needs. The weights are cast once per
step with Transformer Engine's weight cache, every micro-batch with torchao's dynamic recipe,
never when the stack keeps FP8 weights.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

from stallscope.plan._errors import PlanError, listed
from stallscope.plan._gemm import efficiency_defaults, family_names
from stallscope.plan._strategy import ffn_rows_width, gpu_layer_params

if TYPE_CHECKING:
    from stallscope.plan._cluster import Cluster
    from stallscope.plan._model import Model
    from stallscope.plan._strategy import Strategy


@cache
def _recipes() -> dict[str, Any]:
    doc: dict[str, Any] = efficiency_defaults()["fp8_recipes"]
    return doc


def _listed_gpu(gpu: str, key: str) -> bool:
    """Whether ``gpu`` (or a GPU of its die) is in fp8_recipes' list ``key``."""
    names = family_names(gpu)
    return any(n.startswith(g.upper()) for g in _recipes()[key]["gpus"] for n in names)


def mx_gemm_factor(s: Strategy, system: Cluster) -> float:
    """How much longer an FP8 GEMM takes under the stack's recipe than with per-tensor scales
    (1 but for MXFP8); PlanError for MXFP8 on a GPU without block-scaled tensor cores."""
    if s.precision != "fp8" or s.software.fp8_recipe != "mxfp8":
        return 1.0
    gpu = system.device.name
    if not _listed_gpu(gpu, "block_scaled"):
        raise PlanError(
            f"fp8_recipe 'mxfp8' needs block-scaled FP8 tensor cores (Blackwell: "
            f"{listed(_recipes()['block_scaled']['gpus'])}); {gpu} has none: use fp8_recipe "
            "'delayed' or 'current' (per-tensor scales), or a Blackwell system"
        )
    t = _recipes()["mxfp8"]["per_layer_gemm_ms"]
    return float(t["mxfp8"]) / float(t["per_tensor"])


def cast_bytes(s: Strategy, system: Cluster) -> float:
    """Bytes moved per element by a cast to FP8 under the stack's recipe on this GPU."""
    if s.software.fp8_recipe == "mxfp8":  # both layouts, an E8M0 byte per 32 elements each
        return 2 + 2 * (1 + 1 / 32)
    any_layout = _listed_gpu(system.device.name, "any_layout")
    return 3 if any_layout else 4  # + the transpose where GEMMs take only TN


def fp8_casts(model: Model, s: Strategy, system: Cluster, tokens: int) -> tuple[float, float]:
    """(forward, backward) seconds of one layer's FP8 casts for one micro-batch (see the module
    doc): the forward casts the projection's input, and the two norms' outputs under every
    recipe but delayed, and the activation's output under current and dynamic scaling; the
    backward casts each GEMM's output gradient. Current and dynamic scaling read each tensor
    once more for its amax."""
    if s.precision != "fp8":
        return 0.0, 0.0
    d = system.device
    t, h = s.tp, model.hidden
    rows, fw = ffn_rows_width(model, s, tokens)  # the FFN GEMMs' rows and width on this GPU
    f = (2 if model.gated_ffn else 1) * fw
    qkv = model.q_hidden + 2 * model.kv_hidden
    recipe = s.software.fp8_recipe
    amax = recipe in ("current", "dynamic")  # a pass over each tensor for its amax
    norms = recipe != "delayed"  # the norms write 16 bit, a cast follows
    per = cast_bytes(s, system) + (2 if amax else 0)
    fwd_elems = tokens * (model.o_hidden / t + (2 * h if norms else 0)) + (rows * fw if amax else 0)
    kernels = 1 + (2 if norms else 0) + (1 if amax else 0)
    if model.moe:  # the routed copies are cast after the permutation, not by the norm
        fwd_elems += rows * h
        kernels += 1
    bwd_elems = tokens * (qkv / t + h) + rows * (f + h)
    sw = model.shared_ffn_hidden // t  # shared experts: a dense FFN's casts beside
    if sw:
        fwd_elems += tokens * sw if amax else 0
        bwd_elems += tokens * ((2 if model.gated_ffn else 1) * sw + h)
    return d.memory_s(per * fwd_elems, kernels), d.memory_s(per * bwd_elems, 4)


def fp8_weight_casts(model: Model, s: Strategy, system: Cluster, micro_batches: int) -> float:
    """Seconds per step of casting one layer's weights to FP8 (with the transposes or the
    second layout the backward needs)."""
    st = s.software
    if s.precision != "fp8" or st.fp8_params:
        return 0.0
    per_step = micro_batches if st.fp8_recipe == "dynamic" else 1
    nbytes = cast_bytes(s, system) * gpu_layer_params(model, s)
    if s.zero == 3 and s.fsdp_gather_bytes == 1:  # each GPU casts its shard, then gathers FP8
        nbytes /= s.replicas
    return per_step * system.device.memory_s(nbytes, 4)
