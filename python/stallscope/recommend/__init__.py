"""Cloud configurations for a measured training job: the instance catalog (GPU instances with
their prices, each with its source and date) and spot interruption rates."""

from __future__ import annotations

from stallscope.recommend._catalog import (
    CATALOG_COLUMNS,
    filter_catalog,
    load_catalog,
    shipped_catalog_path,
)
from stallscope.recommend._gpu_lookup import gpu_device
from stallscope.recommend._interruptions import INTERRUPTION_COLUMNS, load_spot_interruptions

__all__ = [
    "CATALOG_COLUMNS",
    "INTERRUPTION_COLUMNS",
    "filter_catalog",
    "gpu_device",
    "load_catalog",
    "load_spot_interruptions",
    "shipped_catalog_path",
]
