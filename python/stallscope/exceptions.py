"""Errors and warnings stallscope raises. Every message names the file or input at fault and
what to do about it."""

from __future__ import annotations


class StallscopeError(Exception):
    """Base class of stallscope's errors."""


class TraceError(StallscopeError):
    """Starting or stopping a trace failed (already active, bad option, unwritable directory)."""


class RunDirError(StallscopeError):
    """A run directory (or a file in it) is missing, truncated or corrupt."""


class EventsError(StallscopeError, ValueError):
    """A frame given as events is not in the event schema: a required column is missing (the
    message names the function, the columns and what returns an events frame)."""


class TraceImportError(StallscopeError):
    """An external trace (Kineto / PyTorch profiler JSON) could not be imported."""


class CatalogError(StallscopeError):
    """An instance catalog or a price file could not be used: missing, in an unknown format, a
    column missing or unknown, or a value that is not what the column holds (the message names
    the file, the row and the column)."""


class DataError(StallscopeError):
    """A data pipeline cannot run as asked: an unknown STALLSCOPE_DATA / STALLSCOPE_CACHE value,
    a declared dataset path that does not exist, a generated dataset that is incomplete."""


class AnalyzeError(StallscopeError):
    """The differential stall method cannot run or cannot use a run: a command it cannot
    launch, a configuration that failed, a run without step markers."""


class ReportError(StallscopeError):
    """A report or a figure could not be made: matplotlib is missing, a file type it does not
    write, a frame without a column it needs, a calibration file that cannot be read, an output
    path that cannot be written."""


class StallscopeWarning(UserWarning):
    """Something was skipped or is incomplete, and the result may be too (a missing rank, dropped
    events, rows of an imported trace that could not be used)."""
