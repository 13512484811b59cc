"""Plan a transformer's training: shape + cluster -> tensor / pipeline / data-parallel split,
memory and step time.

The sourced presets it stands on ship in ``data/``: ``model(name)`` / ``models()``
(decoder-transformer shapes: GPT-3, Llama 2/3/3.1, Megatron, MPT) and ``system(name)`` /
``systems()`` (DGX generations, Selene and Eos nodes, cloud GPU instances). Every figure
carries its source URL and date.
"""

from __future__ import annotations

from stallscope.plan._presets import SHAPE_KEYS, ModelShape, model, model_names, models
from stallscope.plan._systems import System, system, system_names, systems

__all__ = [
    "SHAPE_KEYS",
    "ModelShape",
    "System",
    "model",
    "model_names",
    "models",
    "system",
    "system_names",
    "systems",
]
