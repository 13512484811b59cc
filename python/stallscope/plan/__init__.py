"""Plan a transformer's training: shape + cluster -> tensor / pipeline / data-parallel split,
memory and step time.

    from stallscope import plan
    p = plan.predict_model("gpt3-175b", "dgx-a100", nodes=64, tp=8, pp=8, micro_batch=1,
                           global_batch=1536, recompute="full")      # one configuration
    best = plan.plan("gpt3-175b", "dgx-a100", gpus=512, top=10).table  # a ranked Polars frame
    knobs = plan.whatif("gpt3-175b", "dgx-a100", gpus=512, knobs={"nic": [0.5, 1, 2]})
    a = plan.anchor(p, measured_step_s=61.2)  # one measured step of that configuration
    plan.plan("gpt3-175b", a.system, gpus=1024)  # other configurations at its compute rate

Workloads are decoder transformers (``Model``: a JSON file, a dict or a preset name); clusters
are nodes of GPUs (``Cluster``: a system file or a system preset); one configuration is a
``Strategy``. Every step is simulated on the predictor's event engine
(``stallscope.predict``), one pipeline stage per rank class.

The sourced presets it stands on ship in ``data/``: ``model(name)`` / ``models()``
(decoder-transformer shapes: GPT-3, Llama 2/3/3.1, Megatron, MPT) and ``system(name)`` /
``systems()`` (DGX generations, Selene and Eos nodes, cloud GPU instances) and ``stack(name)`` /
``stacks()`` (training frameworks by date: which attention kernels, which overlaps). Every figure
carries its source URL and date.
"""

from __future__ import annotations

from stallscope.plan._anchor import Anchor, anchor
from stallscope.plan._api import plan, predict_model, whatif
from stallscope.plan._cluster import Cluster, load_system
from stallscope.plan._device_model import DeviceModel
from stallscope.plan._errors import PlanError
from stallscope.plan._model import Model, load_model
from stallscope.plan._plot import plot_whatif
from stallscope.plan._predict import STALL_COLUMNS, Prediction, predict_strategy
from stallscope.plan._presets import SHAPE_KEYS, ModelShape, model, model_names, models
from stallscope.plan._search import SearchResult, Space, default_global_batch
from stallscope.plan._stack import DEFAULT_STACK, Stack, load_stack, stack, stack_names, stacks
from stallscope.plan._strategy import Strategy
from stallscope.plan._systems import System, system, system_names, systems

__all__ = [
    "DEFAULT_STACK",
    "SHAPE_KEYS",
    "STALL_COLUMNS",
    "Anchor",
    "Cluster",
    "DeviceModel",
    "Model",
    "ModelShape",
    "PlanError",
    "Prediction",
    "SearchResult",
    "Space",
    "Stack",
    "Strategy",
    "System",
    "anchor",
    "default_global_batch",
    "load_model",
    "load_stack",
    "load_system",
    "model",
    "model_names",
    "models",
    "plan",
    "plot_whatif",
    "predict_model",
    "predict_strategy",
    "stack",
    "stack_names",
    "stacks",
    "system",
    "system_names",
    "systems",
    "whatif",
]
