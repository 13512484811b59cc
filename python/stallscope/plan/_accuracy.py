"""How far the planner's step times are from published measurements: the summary that
bench/predict_public.py writes to ``plan/data/accuracy.json`` each time it runs, shown beside
every prediction so that a reader knows how to take the figures."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

_FILE = Path(__file__).with_name("data") / "accuracy.json"


#: A GPU's own figures are shown once this many of its runs are in the set.
MIN_GPU_RUNS = 3


@cache
def accuracy() -> dict[str, Any] | None:
    """The last public-accuracy summary (runs, mean_error, mean_abs_error, max_abs_error,
    too_fast, date, and the same per GPU under per_gpu), or None when the package ships
    none."""
    if not _FILE.is_file():
        return None
    doc: dict[str, Any] = json.loads(_FILE.read_text())
    return doc


def accuracy_note(gpu: str | None = None, moe: bool = False, anchored: bool = False) -> str:
    """One line on the planner's error against published runs ("" without a summary): on
    ``gpu``'s runs where the set holds at least MIN_GPU_RUNS of them, else on all of them,
    saying so; of mixture-of-experts models' runs when ``moe`` (the summary's ``moe``
    figures, where it has them); of dense runs anchored on other runs of their software and
    GPU when ``anchored`` (a system with a compute factor)."""
    a = accuracy()
    if not a:
        return ""
    date = a["date"]
    if anchored and not moe and (an := a.get("anchored")):
        same = an.get("same_model") or an
        return (
            f"accuracy: anchored on measured steps of the same model, software and GPU, "
            f"{same['runs']} published runs were predicted "
            f"{100 * float(same['mean_abs_error']):.1f} % off on average (median "
            f"{100 * float(same['median_abs_error']):.1f} %, the worst "
            f"{100 * float(same['max_abs_error']):.0f} %); on other models' steps "
            f"{100 * float(an['mean_abs_error']):.1f} % (the worst "
            f"{100 * float(an['max_abs_error']):.0f} %; {date}, docs/plan.md)"
        )
    kind = ""
    if moe and (a.get("moe") or {}).get("runs"):
        a, kind = a["moe"], "mixture-of-experts "
    own = (a.get("per_gpu") or {}).get(gpu) if gpu else None
    scope = f"{a['runs']} published {kind}training runs"
    lead = ""
    if own and int(own["runs"]) >= MIN_GPU_RUNS:
        a, scope = own, f"the {own['runs']} published {kind}training runs on {gpu}"
    elif gpu:
        n = int(own["runs"]) if own else 0
        lead = f"{n or 'no'} published {kind}run{'' if n == 1 else 's'} on {gpu}; "
    mean = 100 * float(a["mean_error"])
    side = "short" if mean < 0 else "long"
    short = int(a["too_fast"]) / max(1, int(a["runs"]))
    bound = "lower" if short >= 0.5 else "upper"
    if short >= 0.9 or short <= 0.1:  # one-sided only when nearly every run errs that way
        how = f"read them as {bound} bounds"
    else:
        how = f"most are {bound} bounds, give or take {100 * float(a['mean_abs_error']):.0f} %"
    return (
        f"accuracy: {lead}against {scope} the predicted steps are "
        f"{abs(mean):.0f} % too {side} on average ({a['too_fast']} of {a['runs']} too short, the "
        f"worst {100 * float(a['max_abs_error']):.0f} % off; {date}, docs/plan.md): {how}"
    )
