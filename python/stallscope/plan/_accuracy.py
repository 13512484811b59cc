"""How far the planner's step times are from published measurements: the summary that
bench/predict_public.py writes to ``plan/data/accuracy.json`` each time it runs, shown beside
every prediction so that a reader knows how to take the figures."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

_FILE = Path(__file__).with_name("data") / "accuracy.json"


@cache
def accuracy() -> dict[str, Any] | None:
    """The last public-accuracy summary (runs, mean_error, mean_abs_error, max_abs_error,
    too_fast, date), or None when the package ships none."""
    if not _FILE.is_file():
        return None
    doc: dict[str, Any] = json.loads(_FILE.read_text())
    return doc


def accuracy_note() -> str:
    """One line on the planner's error against published runs ("" without a summary)."""
    a = accuracy()
    if not a:
        return ""
    mean = 100 * float(a["mean_error"])
    side = "short" if mean < 0 else "long"
    short = int(a["too_fast"]) / max(1, int(a["runs"]))
    bound = "lower" if short >= 0.5 else "upper"
    if short >= 0.9 or short <= 0.1:  # one-sided only when nearly every run errs that way
        how = f"read them as {bound} bounds"
    else:
        how = f"most are {bound} bounds, give or take {100 * float(a['mean_abs_error']):.0f} %"
    return (
        f"accuracy: against {a['runs']} published training runs the predicted steps are "
        f"{abs(mean):.0f} % too {side} on average ({a['too_fast']} of {a['runs']} too short, the "
        f"worst {100 * float(a['max_abs_error']):.0f} % off; {a['date']}, docs/plan.md): {how}"
    )
