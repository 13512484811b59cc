"""What the recommender needs to know about the job besides its measured step: the amount of
work (steps, samples, tokens or epochs) and the batch facts that convert it into steps on a
configuration with another number of ranks.

Units. A *micro-batch* is one rank's batch as measured (``batch_size`` samples). A step on W
ranks with ``a`` micro-batches of gradient accumulation processes W x a micro-batches. Every
amount of work becomes a number of micro-batches first, then steps per configuration.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

from stallscope.recommend._errors import RecommendError

UNITS: Final = ("steps", "samples", "tokens", "epochs")


@dataclass(frozen=True)
class Job:
    """Facts about the job that the trace does not hold (each None where unknown).

    batch_size: samples per rank per step as measured (one micro-batch). global_batch: the
    samples per optimizer step to keep on every configuration (its ranks x batch_size must
    divide it; the quotient is the gradient accumulation); None: each rank keeps its measured
    batch and the global batch grows with the ranks. seq_len: tokens per sample.
    dataset_samples: samples per epoch. memory_gb: GPU memory the job needs per GPU, GB (a
    configuration whose GPUs have less is left out); None: not checked."""

    batch_size: int | None = None
    global_batch: int | None = None
    seq_len: int | None = None
    dataset_samples: int | None = None
    memory_gb: float | None = None

    def __post_init__(self) -> None:
        for name in ("batch_size", "global_batch", "seq_len", "dataset_samples"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
                raise RecommendError(f"{name} must be a whole number >= 1, got {v!r}")
        if self.memory_gb is not None and not (
            math.isfinite(self.memory_gb) and self.memory_gb > 0
        ):
            raise RecommendError(f"memory_gb must be a number of GB > 0, got {self.memory_gb!r}")
        if self.global_batch is not None:
            if self.batch_size is None:
                raise RecommendError(
                    f"a global batch of {self.global_batch} needs the measured batch per rank to "
                    "split it into ranks and accumulation steps: give batch_size (--batch-size)"
                )
            if self.global_batch % self.batch_size:
                raise RecommendError(
                    f"the global batch {self.global_batch} is not a whole number of measured "
                    f"batches of {self.batch_size}: give a global batch that "
                    f"{self.batch_size} divides"
                )


@dataclass(frozen=True)
class Work:
    """An amount of work: ``amount`` of ``unit`` (one of UNITS)."""

    unit: str
    amount: float

    def __post_init__(self) -> None:
        if self.unit not in UNITS:
            raise RecommendError(f"unknown unit of work {self.unit!r}; use one of {UNITS}")
        if not (math.isfinite(self.amount) and self.amount > 0):
            raise RecommendError(f"the amount of work must be > 0 {self.unit}, got {self.amount}")

    def describe(self) -> str:
        return f"{self.amount:,.10g} {self.unit}"


def micro_batches(work: Work, job: Job, measured_ranks: int) -> float:
    """The work as a number of measured micro-batches. Steps are steps of the global batch
    (``job.global_batch``, else the measured run's: its ranks x one micro-batch)."""
    b = job.batch_size
    if work.unit == "steps":
        per_step = job.global_batch // b if job.global_batch and b else measured_ranks
        return work.amount * per_step
    if b is None:
        raise RecommendError(
            f"{work.describe()} needs the batch per rank to count steps: give batch_size "
            "(--batch-size, samples per rank per step as measured)"
        )
    if work.unit == "samples":
        return work.amount / b
    if work.unit == "tokens":
        if job.seq_len is None:
            raise RecommendError(
                f"{work.describe()} needs the tokens per sample: give seq_len (--seq-len)"
            )
        return work.amount / (job.seq_len * b)
    if job.dataset_samples is None:
        raise RecommendError(
            f"{work.describe()} needs the samples per epoch: give dataset_samples "
            "(--dataset-samples)"
        )
    return work.amount * job.dataset_samples / b


def accumulation(job: Job, ranks: int) -> int | None:
    """Micro-batches per rank per step on ``ranks`` ranks: 1 without a global batch to keep,
    else global_batch / (ranks x batch_size); None where that is not a whole number >= 1."""
    if job.global_batch is None or job.batch_size is None:
        return 1
    per_rank, rest = divmod(job.global_batch, ranks * job.batch_size)
    return per_rank if per_rank >= 1 and rest == 0 else None


def steps(total_micro_batches: float, ranks: int, accumulation: int) -> int:
    """Whole steps to process the micro-batches on ``ranks`` ranks (the last one may be
    partly filled)."""
    return max(1, math.ceil(total_micro_batches / (ranks * accumulation) - 1e-9))
