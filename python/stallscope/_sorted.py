"""Helpers on sorted NumPy arrays, shared by the importer and the analysis (no numpy.ma: its
import costs ~20 ms on first use in a process, and np.unique brings it in)."""

from __future__ import annotations

from typing import Any

import numpy as np

_Array = np.ndarray[Any, Any]


def segment_starts(*keys: _Array) -> _Array:
    """Mask of the positions where any of the sorted `keys` changes (the first is one): the
    heads of the segments of equal keys."""
    n = keys[0].size
    new = np.zeros(n, bool)
    if n:
        new[0] = True
        for k in keys:
            new[1:] |= k[1:] != k[:-1]
    return new


def distinct(a: _Array) -> _Array:
    """The sorted distinct values of `a` (np.unique without numpy.ma)."""
    s = np.sort(a)
    return s[segment_starts(s)]
