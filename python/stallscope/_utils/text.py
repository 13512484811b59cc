"""Short texts for people: lists of numbers as ranges."""

from __future__ import annotations

from collections.abc import Iterable


def ranges(numbers: Iterable[int]) -> str:
    """Sorted distinct integers as ranges: [0, 1, 2, 5, 7, 8] -> "0-2, 5, 7-8"."""
    out: list[str] = []
    run: list[int] = []
    for n in sorted(set(numbers)):
        if run and n == run[-1] + 1:
            run.append(n)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [n]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return ", ".join(out)


def ranks_text(ranks: Iterable[int]) -> str:
    """ "rank 3" or "ranks 0-2, 5"."""
    rs = sorted(set(ranks))
    return f"rank{'s' if len(rs) != 1 else ''} {ranges(rs)}"
