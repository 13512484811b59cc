"""What an FP8 or NVFP4 recipe adds to a layer beyond its GEMMs' FP8 rate: the casts of GEMM
inputs and weights, and the rate of block-scaled GEMM kernels.

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

Precision ``nvfp4`` (Transformer Engine's NVFP4 block scaling, Blackwell): 4-bit values with an
E4M3 scale per 16 and an FP32 scale per tensor, so every input is cast as under current scaling
(an amax pass first), in both layouts. Its GEMM kernels and its casts are timed against
measured ones (``fp8_recipes.nvfp4``): the kernels as per-tensor FP8's times their measured ratio,
the casts as MXFP8's bytes times theirs (the Hadamard transform and stochastic rounding cost
beyond the bytes).

A cast reads 16 bit and writes FP8; where the GPU's FP8 GEMMs take only the TN layout (Hopper)
a per-tensor cast also writes the transpose the backward needs. The weights are cast once per
step with Transformer Engine's weight cache, every micro-batch with torchao's dynamic recipe,
never when the stack keeps FP8 weights.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, Final

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


#: Precisions whose GEMM inputs are cast from 16 bit (the GEMMs of the others run in 16 bit).
CAST_PRECISIONS: Final = ("fp8", "nvfp4")


def gemm_precision(precision: str) -> str:
    """The precision a layer's GEMMs are timed at before ``block_gemm_factor``: NVFP4 GEMMs
    start from FP8's rate."""
    return "fp8" if precision == "nvfp4" else precision


def _check_block_scaled(what: str, gpu: str, fix: str) -> None:
    if not _listed_gpu(gpu, "block_scaled"):
        raise PlanError(
            f"{what} tensor cores (Blackwell: "
            f"{listed(_recipes()['block_scaled']['gpus'])}); {gpu} has none: {fix}"
        )


def block_gemm_factor(s: Strategy, system: Cluster) -> float:
    """How much longer a layer's GEMM takes under the run's precision and recipe than
    ``gemm_precision``'s rate gives (1 but for MXFP8 and NVFP4); PlanError on a GPU without
    block-scaled tensor cores."""
    gpu = system.device.name
    if s.precision == "nvfp4":
        _check_block_scaled(
            "precision 'nvfp4' needs block-scaled FP4",
            gpu,
            "use fp8 or bf16, or a Blackwell system",
        )
        t = _recipes()["nvfp4"]["per_layer_gemm_ms"]
        measured = float(t["nvfp4"]) / float(t["per_tensor"])
        fp4 = system.device.peak_tflops.get("fp4")
        fp8 = system.device.peak_tflops.get("fp8")
        return max(measured, fp8 / fp4) if fp4 and fp8 else measured  # never past the peak
    if s.precision != "fp8" or s.software.fp8_recipe != "mxfp8":
        return 1.0
    _check_block_scaled(
        "fp8_recipe 'mxfp8' needs block-scaled FP8",
        gpu,
        "use fp8_recipe 'delayed' or 'current' (per-tensor scales), or a Blackwell system",
    )
    t = _recipes()["mxfp8"]["per_layer_gemm_ms"]
    return float(t["mxfp8"]) / float(t["per_tensor"])


def saved_input_bytes(precision: str) -> float:
    """Bytes per value of a GEMM input kept for the backward: its FP8 copy, its column-wise
    NVFP4 copy (4 bits and a scale per 16), else 16 bit."""
    if precision == "nvfp4":
        return float(_recipes()["nvfp4"]["saved_input_bytes"])
    return 1.0 if precision == "fp8" else 2.0


def cast_bytes(s: Strategy, system: Cluster) -> float:
    """Bytes moved per element by a cast to FP8 (or NVFP4) under the stack's recipe on this
    GPU; NVFP4's in MXFP8-cast bytes of the same time."""
    mx = 2 + 2 * (1 + 1 / 32)  # both layouts, an E8M0 byte per 32 elements each
    if s.precision == "nvfp4":
        q = _recipes()["nvfp4"]["per_layer_quantize_ms"]
        return mx * float(q["nvfp4"]) / float(q["mxfp8"])
    if s.software.fp8_recipe == "mxfp8":
        return mx
    any_layout = _listed_gpu(system.device.name, "any_layout")
    return 3 if any_layout else 4  # + the transpose where GEMMs take only TN


def fp8_casts(model: Model, s: Strategy, system: Cluster, tokens: int) -> tuple[float, float]:
    """(forward, backward) seconds of one layer's FP8 casts for one micro-batch (see the module
    doc): the forward casts the projection's input, and the two norms' outputs under every
    recipe but delayed, and the activation's output under current and dynamic scaling and
    NVFP4; the backward casts each GEMM's output gradient. Current and dynamic scaling read
    each tensor once more for its amax; an NVFP4 cast is two kernels (the amax, the cast)."""
    if s.precision not in CAST_PRECISIONS:
        return 0.0, 0.0
    d = system.device
    t, h = s.tp, model.hidden
    rows, fw = ffn_rows_width(model, s, tokens)  # the FFN GEMMs' rows and width on this GPU
    f = (2 if model.gated_ffn else 1) * fw
    qkv = model.q_hidden + 2 * model.kv_hidden
    recipe = "nvfp4" if s.precision == "nvfp4" else s.software.fp8_recipe
    amax = recipe in ("current", "dynamic", "nvfp4")  # each tensor's scale from its own amax
    norms = recipe != "delayed"  # the norms write 16 bit, a cast follows
    # a pass over each tensor for its amax (NVFP4's measured cast cost holds its own)
    per = cast_bytes(s, system) + (2 if amax and recipe != "nvfp4" else 0)
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
    launches = 2 if recipe == "nvfp4" else 1
    return (
        d.memory_s(per * fwd_elems, kernels * launches),
        d.memory_s(per * bwd_elems, 4 * launches),
    )


def fp8_weight_casts(model: Model, s: Strategy, system: Cluster, micro_batches: int) -> float:
    """Seconds per step of casting one layer's weights to FP8 (with the transposes or the
    second layout the backward needs)."""
    st = s.software
    if s.precision not in CAST_PRECISIONS or (st.fp8_params and s.precision == "fp8"):
        return 0.0
    per_step = micro_batches if st.fp8_recipe == "dynamic" and s.precision == "fp8" else 1
    nbytes = cast_bytes(s, system) * gpu_layer_params(model, s)
    if s.zero == 3 and s.fsdp_gather_bytes == 1:  # each GPU casts its shard, then gathers FP8
        nbytes /= s.replicas
    return per_step * system.device.memory_s(nbytes, 4)
