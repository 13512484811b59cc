"""Predict a training job's step time and stalls on configurations never run.

The engine (`_engine`) simulates one step per rank class: tasks on in-order streams with
dependencies; its timeline goes through the stall table's attribution.
"""

from __future__ import annotations
