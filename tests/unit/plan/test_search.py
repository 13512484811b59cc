"""The strategy search: it finds the best configuration a brute-force run of the reference
engine finds, ranks by step time, keeps only what fits, and says when nothing does."""

from __future__ import annotations

import pytest

from stallscope.plan import Cluster, Model, PlanError, load_model, load_system
from stallscope.plan._costs import costs
from stallscope.plan._layout import layout
from stallscope.plan._memory import GIB, memory
from stallscope.plan._predict import shape_of, slot_values
from stallscope.plan._schedule import build, in_flight_counts
from stallscope.plan._search import Space, candidates, search

from .conftest import DGX_A100, GPT3


def _reference_step(model: Model, system: Cluster, s: object) -> int:
    from stallscope.plan._strategy import Strategy

    assert isinstance(s, Strategy)
    lay = layout(s.tp, s.pp, s.dp, system.gpus_per_node)
    sch = build(shape_of(model, s, lay, detail=False))
    sch.graph.duration[:] = sch.durations(slot_values(costs(model, s, system, lay)))
    return sch.graph.run().makespan  # the Python engine, the reference


def test_search_finds_the_brute_force_best(small: Model) -> None:
    system = load_system(DGX_A100 | {"gpus_per_node": 4, "hbm_GB": 16})
    space = Space(micro_batches=(1, 2), interleave=(1, 2))
    res = search(small, system, 8, global_batch=16, top=5, space=space)
    every = [
        s
        for s in candidates(small, 8, 16, space, 4)
        if memory(small, s, 16 * GIB, in_flight_counts(s.pp, s.micro_batches, s.interleave)).fits
    ]
    assert res.fitting == len(every) and res.enumerated >= len(every)
    steps = sorted(_reference_step(small, system, s) for s in every)
    got = [round(x * 1e9) for x in res.table["step_s"].to_list()]
    assert got == pytest.approx(steps[:5], abs=2)  # ns rounding of the seconds column
    assert res.table["rank"].to_list() == [1, 2, 3, 4, 5]
    # the ranked rows' detailed simulation agrees with the fast one
    for p, row in zip(res.best, res.table.iter_rows(named=True), strict=True):
        assert p.step_ns == pytest.approx(row["step_s"] * 1e9, rel=1e-6)
        assert sum(p.columns().values()) == p.step_ns


def test_a_model_that_fits_one_gpu_trains_data_parallel(small: Model) -> None:
    res = search(small, load_system(DGX_A100), 8, global_batch=64, top=3)
    best = res.table.row(0, named=True)
    assert (best["tp"], best["pp"], best["dp"]) == (1, 1, 8)
    assert best["recompute"] == "none"
    assert res.table["step_s"].is_sorted()


def test_what_does_not_fit_is_left_out_and_nothing_fitting_is_an_error(gpt3: Model) -> None:
    tiny = load_system(DGX_A100 | {"hbm_GB": 16})
    with pytest.raises(PlanError, match="no configuration of 'gpt3-175b' fits on 8") as err:
        search(gpt3, tiny, 8, global_batch=8)
    # the smallest configuration tried, by how much it misses and what holds the most
    words = str(err.value)
    assert "8 x 2,048 tokens" in words and "the smallest, tp" in words
    over = float(words.split("GiB over")[0].rsplit(", ", 1)[1])
    assert over > 0 and "most of it optimizer" in words
    assert "shorter sequences" not in words  # 2,048 tokens: not the lever
    long = load_model(
        {
            "name": "long",
            "layers": 8,
            "hidden": 4096,
            "heads": 32,
            "seq_len": 131072,
            "vocab": 32000,
        }
    )
    with pytest.raises(PlanError, match=r"shorter sequences \(seq_len, --seq-len: 131,072 now\)"):
        search(long, tiny, 8, global_batch=64, space=Space(recompute=("none",)))
    with pytest.raises(
        PlanError, match=r"do not fill whole nodes of 8: use a multiple, e\.g\. 8 or 16"
    ):
        search(gpt3, tiny, 12, global_batch=12)


def test_gpus_that_split_nothing_name_the_divisibility_and_what_would(gpt3: Model) -> None:
    """7 GPUs divide neither GPT-3's 96 heads nor its 96 layers, and a batch of 2048 is not a
    multiple of 7: with the even split alone the error says so and names GPU counts and
    batches that do split. With the embedding and the loss as layers, 98 = 7 x 14 does."""
    a100 = load_system(DGX_A100)
    even = Space(pipeline_split=("even",))
    with pytest.raises(PlanError) as err:
        search(gpt3, a100, 7, global_batch=2048, space=even)
    msg = str(err.value)
    assert "no split of 7 GPUs" in msg and "96 heads" in msg and "96 layers" in msg
    assert "Use 6 or 8 GPUs, or a global batch of 2044 or 2051" in msg
    for g in (6, 8):  # what it names does split
        assert next(candidates(gpt3, g, 2048, even, 8), None) is not None
    assert next(candidates(gpt3, 7, 2051, even, 8), None) is not None
    named = Space(pipeline_split=("even", "embedding+loss"))
    seven = list(candidates(gpt3, 7, 2048, named, 8))
    assert seven and {(s.tp, s.pp, s.embedding_as_layer, s.loss_as_layer) for s in seven} == {
        (1, 7, True, True)
    }
    # and first and last stages of 13 around five of 14 (the uneven split, by default)
    ends = {
        (s.pp, s.first_stage_layers, s.last_stage_layers)
        for s in candidates(gpt3, 7, 2048, Space(), 8)
    }
    assert ends == {(7, None, None), (7, 13, 13)}


def test_gpt3_175b_on_64_dgx_a100_nodes(gpt3: Model, a100: Cluster) -> None:
    res = search(gpt3, a100, 512, global_batch=1536, top=5)
    assert res.enumerated > 1000 and res.table.height == 5
    for row in res.table.iter_rows(named=True):
        assert row["memory_GiB"] <= 80
        assert row["tp"] * row["pp"] * row["dp"] == 512
        assert 0.2 < row["mfu"] < 0.9


def test_every_candidate_passes_the_checks(gpt3: Model) -> None:
    from stallscope.plan._strategy import check

    space = Space(micro_batches=(1, 2, 4, 8, 16), interleave=(1, 2, 3, 4, 6, 8))
    n = 0
    for s in candidates(gpt3, 1536, 1536, space, 8):
        check(gpt3, s, 1536)
        n += 1
    assert n > 1000


def test_the_search_tries_megatron_core_s_uneven_splits(a100: Cluster) -> None:
    """30 layers split over 2, 3, 5, 6, ... stages; with the embedding and the loss as layers
    32 split over 2, 4, 8, ...; with one of them 31 over none."""
    m = load_model(
        GPT3
        | {
            "name": "gpt3-30",
            "layers": 30,
            "hidden": 4096,
            "heads": 32,
            "kv_heads": 32,
            "ffn_hidden": 16384,
        }
    )
    named = Space(pipeline_split=("even", "embedding+loss"))
    both = list(candidates(m, 64, 512, named, 8))
    by_split = {(s.embedding_as_layer, s.loss_as_layer) for s in both}
    assert by_split == {(False, False), (True, True)}
    assert {s.pp for s in both if s.embedding_as_layer} == {2, 4, 8, 16, 32}
    assert {s.pp for s in both if not s.embedding_as_layer} == {1, 2}
    # the uneven split where no even one exists: 7 + 8 + 8 + 7 on 4 stages, ... 1 + 2 x 14 + 1;
    # interleaved by 2, every count even: 8 + 8 + 8 + 6, 4 + 4 x 6 + 2
    uneven = {(s.pp, s.first_stage_layers) for s in candidates(m, 64, 512, Space(), 8)}
    got = {(pp, f) for pp, f in uneven if f is not None}
    assert got == {(4, 7), (4, 8), (8, 3), (8, 4), (16, 1)}
    one = Space(pipeline_split=("embedding", "loss"))
    assert next(candidates(m, 64, 512, one, 8), None) is None  # 31 is prime
    res = search(m, a100, 64, global_batch=512, top=50, space=named)
    splits = set(res.table["split"])
    assert splits == {"even", "embedding+loss"}
    for row, p in zip(res.table.iter_rows(named=True), res.best, strict=True):
        assert p.strategy.embedding_as_layer == (row["split"] == "embedding+loss")
        assert p.step_ns == pytest.approx(row["step_s"] * 1e9, rel=1e-6)
    with pytest.raises(PlanError, match=r"pipeline split middle is not among .*embedding\+loss"):
        search(m, a100, 64, global_batch=512, space=Space(pipeline_split=("middle",)))


def test_a_context_parallel_size_below_one_is_refused() -> None:
    """The API gets the clear error the CLI gives, not a division by zero in the search."""
    for sizes in ((0,), (1, -2), ()):
        with pytest.raises(PlanError, match=r"context-parallel sizes .*: give sizes >= 1"):
            Space(context_parallel=sizes)


def test_timing_by_slot_equals_the_duration_matrix(gpt3: Model, a100: Cluster) -> None:
    """The search times each graph natively from per-slot costs; the makespans are those of
    the rows x tasks duration matrix numpy would build (rint: half to even), halves included."""
    import numpy as np

    from stallscope.plan._schedule import SLOTS
    from stallscope.plan._search import compiled_schedule
    from stallscope.plan._strategy import Strategy

    s = Strategy(tp=8, pp=4, dp=2, micro_batch=1, global_batch=16, interleave=2)
    cg, slot, mult = compiled_schedule(shape_of(gpt3, s, layout(8, 4, 2, 8), detail=False))
    rng = np.random.default_rng(7)
    costs_ns = rng.integers(0, 2_000_000, size=(5, len(SLOTS))) / 2  # x.5 ns: ties to round
    want = cg.makespans(np.rint(costs_ns[:, slot] * mult[None, :]))
    assert cg.makespans_by_slot(costs_ns, slot, mult).tolist() == want.tolist()
    with pytest.raises(ValueError, match="costs must be"):
        cg.makespans_by_slot(costs_ns[0], slot, mult)
