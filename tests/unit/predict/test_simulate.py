"""The step simulator through predict(): properties over random profiles (hypothesis) and
exact small cases."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from stallscope.analysis import STALL_COLUMNS
from stallscope.predict import Target, predict
from stallscope.predict._profile import Bucket, Loader, Measured, Phase, Profile

MS = 1_000_000


def profile(
    fwd: float = 10 * MS,
    bwd: float = 20 * MS,
    opt: float = 2 * MS,
    buckets: list[tuple[int, float]] | None = None,
    overlap: float = 1.0,
    straggler: float = 1.0,
    data: float = 1 * MS,
    host: float = 0.5 * MS,
    period: float | None = None,
) -> Profile:
    bs = buckets if buckets is not None else [(4_000_000, 8 * MS), (8_000_000, 20 * MS)]
    return Profile(
        measured=Measured(
            ranks=2, nodes=1, ranks_per_node=2, backend="gloo", device="cpu", step_ns=40 * MS
        ),
        phases=[Phase("forward", fwd), Phase("backward", bwd), Phase("optimizer", opt)],
        buckets=[Bucket(k, n, min(r, bwd), measured_ns=n * 1.0) for k, (n, r) in enumerate(bs)],
        data_ns=data,
        host_ns=host,
        loader=Loader(wait_ns=data, floor_ns=data, period_ns=period),
        comm_overlap=overlap,
        straggler_factor=straggler,
        straggler_ranks=1 if straggler > 1 else 0,
    )


def row(p: Profile, t: Target) -> dict[str, float]:
    return predict(p, t).row(0, named=True)


profiles = st.builds(
    profile,
    fwd=st.floats(0, 50 * MS),
    bwd=st.floats(1 * MS, 100 * MS),
    opt=st.floats(0, 10 * MS),
    buckets=st.lists(
        st.tuples(st.integers(1, 50_000_000), st.floats(0, 100 * MS)), min_size=1, max_size=6
    ).map(lambda bs: sorted(bs, key=lambda b: b[1])),
    overlap=st.sampled_from([0.0, 0.5, 1.0]),
    straggler=st.sampled_from([1.0, 1.3]),
)
shapes = st.tuples(st.integers(1, 8), st.integers(1, 4))


@settings(max_examples=40, deadline=None)
@given(profiles, shapes, st.floats(10e6, 10e9), st.floats(1.1, 20))
def test_a_slower_link_never_makes_the_step_shorter(
    p: Profile, shape: tuple[int, int], rate: float, slower: float
) -> None:
    nodes, per = shape
    fast = row(p, Target(nodes, per, rate))
    slow = row(p, Target(nodes, per, rate / slower))
    assert slow["step_ns"] >= fast["step_ns"] - 1


@settings(max_examples=40, deadline=None)
@given(profiles, shapes, st.floats(10e6, 10e9))
def test_columns_sum_to_the_step(p: Profile, shape: tuple[int, int], rate: float) -> None:
    r = row(p, Target(*shape, rate))
    assert sum(r[c] for c in STALL_COLUMNS) == pytest.approx(r["step_ns"], rel=1e-9, abs=2)
    assert all(r[c] >= 0 for c in STALL_COLUMNS)


@settings(max_examples=40, deadline=None)
@given(profiles, shapes, st.floats(10e6, 10e9))
@example(  # one rank, with a straggler: the measured configuration's graph is built first
    profile(fwd=0.0, bwd=1e6, opt=0.0, buckets=[(2, 0.0)], overlap=1.0, straggler=1.3), (1, 1), 1e7
)
def test_overlap_never_exceeds_compute(p: Profile, shape: tuple[int, int], rate: float) -> None:
    """The comm hidden behind compute is at most the compute: exposed >= comm - compute."""
    from stallscope.predict._predict import Predictor

    nodes, per = shape
    t = Target(nodes, per, rate, straggler_ranks=0)
    pred = Predictor(p)
    res = pred.one(t)
    # the target's own step graph (the measured configuration's, built first when the profile
    # fits its own link, has a straggler class and other durations)
    step = pred._steps[(t.strategy, t.accumulation, ("typical",))]
    comm = sum(step.g.duration[task] for task, _ in step.classes[0].comm)
    cols = res.classes[0][2]
    exposed = cols["network"] + cols["interconnect"] + cols["sync_wait"]
    assert exposed >= comm - cols["compute"] - 2
    assert cols["compute"] == pytest.approx(
        p.compute_ns, abs=len(step.g) + 1
    )  # every task's rounding


def test_the_last_bucket_never_overlaps() -> None:
    # one bucket, ready at the end of the backward: all its all-reduce is exposed
    p = profile(buckets=[(10_000_000, 20 * MS)])
    r = row(p, Target(2, 1, 1e9))
    comm_s = 10_000_000 / (1e9 / 8 * 0.93566)  # ring of 2: n bytes each way, TCP efficiency
    assert r["network_ns"] == pytest.approx(comm_s * 1e9, rel=1e-3)
    assert r["step_ns"] == pytest.approx(
        p.compute_ns + p.data_ns + p.host_ns + comm_s * 1e9, rel=1e-3
    )


def test_early_buckets_hide_behind_compute_unless_the_cores_are_busy() -> None:
    gpu_like = profile(overlap=1.0)
    cpu_like = profile(overlap=0.0)
    t = Target(2, 1, 1e9)
    assert row(gpu_like, t)["network_ns"] < row(cpu_like, t)["network_ns"]
    # with no overlap every byte is exposed: 12 MB at the link rate
    assert row(cpu_like, t)["network_ns"] == pytest.approx(
        12_000_000 / (1e9 / 8 * 0.93566) * 1e9, rel=1e-3
    )


def test_gradient_accumulation_communicates_once() -> None:
    p = profile(overlap=0.0)
    one, four = row(p, Target(2, 1, 1e9)), row(p, Target(2, 1, 1e9, accumulation=4))
    assert four["compute_ns"] == pytest.approx(4 * 30 * MS + 2 * MS, abs=100)
    assert four["network_ns"] == pytest.approx(one["network_ns"], rel=1e-6)
    assert four["speedup"] > one["speedup"]  # four micro-batches per step


def test_a_straggler_adds_sync_wait_to_the_others() -> None:
    even, slow = profile(), profile(straggler=1.5)
    t = Target(4, 1, 1e9)
    a, b = row(even, t), row(slow, t)
    assert b["step_ns"] > a["step_ns"]
    assert a["sync_wait_ns"] == 0 and b["sync_wait_ns"] > 0
    # no straggler asked for: as even
    c = row(slow, Target(4, 1, 1e9, straggler_ranks=0))
    assert c["step_ns"] == pytest.approx(a["step_ns"])


def test_compute_scale_scales_compute_only() -> None:
    p = profile()
    base, half = row(p, Target(1, 1)), row(p, Target(1, 1, compute_scale=0.5))
    assert half["compute_ns"] == pytest.approx(base["compute_ns"] / 2, abs=10)
    assert half["data_ns"] == base["data_ns"] and half["host_ns"] == base["host_ns"]


def test_a_loader_slower_than_the_step_starves_it() -> None:
    p = profile(period=200 * MS)
    r = row(p, Target(1, 1))
    assert r["step_ns"] == pytest.approx(200 * MS, abs=10)
    assert r["data_ns"] == pytest.approx(200 * MS - (r["step_ns"] - r["data_ns"]), abs=10)
    assert r["data_ns"] > 150 * MS


def test_fsdp_gathers_parameters_and_shards_the_optimizer() -> None:
    p = profile(opt=8 * MS)
    ddp, fsdp = row(p, Target(2, 1, 1e9)), row(p, Target(2, 1, 1e9, strategy="fsdp"))
    assert sum(fsdp[c] for c in STALL_COLUMNS) == pytest.approx(fsdp["step_ns"], abs=2)
    assert fsdp["compute_ns"] == pytest.approx(30 * MS + 8 * MS / 2, abs=100)
    # two all-gathers and a reduce-scatter of the parameters move more than DDP's all-reduce
    assert fsdp["network_ns"] > ddp["network_ns"]
    assert row(p, Target(1, 1, strategy="fsdp"))["network_ns"] == 0


def test_predict_rows_and_schema() -> None:
    frame = predict(profile(), [Target(1, 1), Target(2, 2, 1e9)])
    assert frame.height == 2
    assert frame.columns[:9] == [
        "nodes",
        "ranks_per_node",
        "ranks",
        "rate_bps",
        "network",
        "device",
        "strategy",
        "accumulation",
        "step_ns",
    ]
    assert frame["speedup"].dtype == pl.Float64
    assert frame["device"].to_list() == ["cpu", "cpu"]
