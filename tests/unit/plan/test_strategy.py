"""Bad configurations: each a PlanError naming the rule and the nearest valid choices."""

from __future__ import annotations

import pytest

from stallscope.plan import Model, PlanError, Strategy
from stallscope.plan._strategy import check

from .conftest import GPT3

GPT3_FLASH = GPT3 | {"flash_attention": True}


def test_heads_not_divisible_by_tp(gpt3: Model) -> None:
    with pytest.raises(
        PlanError, match=r"tp=5 does not divide heads \(96\).*nearest valid tp: 3, 4, 6"
    ):
        check(gpt3, Strategy(tp=5, global_batch=5))


def test_layers_not_divisible_by_pp_times_interleave(gpt3: Model) -> None:
    with pytest.raises(PlanError, match=r"pp x interleave = 5 x 1 = 5.*nearest valid pp: 3, 4, 6"):
        check(gpt3, Strategy(pp=5, global_batch=8))
    with pytest.raises(PlanError, match=r"8 x 5 = 40.*nearest valid interleave for pp=8: 3, 4, 6"):
        check(gpt3, Strategy(pp=8, interleave=5, global_batch=64))


def test_batch_not_divisible_by_dp_times_micro_batch(gpt3: Model) -> None:
    with pytest.raises(
        PlanError,
        match=r"global batch 100 .* dp x micro-batch = 8 x 2 = 16: nearest valid global batches 96 and 112",
    ):
        check(gpt3, Strategy(dp=8, micro_batch=2, global_batch=100))


def test_gpu_count_mismatch_names_the_dp_that_fits(gpt3: Model) -> None:
    with pytest.raises(PlanError, match="dp must be 16"):
        check(gpt3, Strategy(tp=8, pp=4, dp=8, global_batch=64), gpus=512)
    with pytest.raises(PlanError, match="does not divide 512"):
        check(gpt3, Strategy(tp=6, pp=1, dp=8, global_batch=64), gpus=512)


def test_other_rules(gpt3: Model) -> None:
    cases = [
        (Strategy(recompute="some"), "recompute 'some' is not one of none, selective, full"),
        (Strategy(precision="fp4"), "precision 'fp4'"),
        (Strategy(zero=4), "ZeRO stage 4"),
        (Strategy(tp=0), "tp must be a positive integer"),
        (Strategy(interleave=2, global_batch=8), "needs pipeline parallelism"),
        (Strategy(sequence_parallel=True), "needs tp > 1"),
        (Strategy(pp=4, interleave=2, global_batch=6), "multiple of pp"),
    ]
    for s, msg in cases:
        with pytest.raises(PlanError, match=msg):
            check(gpt3, s)


def test_gqa_tp_must_divide_kv_heads() -> None:
    from stallscope.plan import load_model

    m = load_model(
        {"layers": 8, "hidden": 4096, "heads": 32, "kv_heads": 8, "seq_len": 8, "vocab": 8}
    )
    with pytest.raises(
        PlanError, match=r"tp=16 does not divide kv_heads \(8\).*nearest valid tp: 2, 4, 8"
    ):
        check(m, Strategy(tp=16))


def test_context_parallel_rules(gpt3: Model) -> None:
    from stallscope.plan import load_model

    with pytest.raises(PlanError, match="tp x pp x cp x dp = 64 GPUs, but the job has 32"):
        check(gpt3, Strategy(tp=8, cp=2, dp=4, global_batch=8), gpus=32)
    with pytest.raises(PlanError, match="multiple of 12"):
        check(load_model(GPT3_FLASH | {"seq_len": 2054}), Strategy(cp=6, global_batch=1))
    with pytest.raises(PlanError, match="flash attention only"):
        check(load_model(GPT3_FLASH | {"flash_attention": False}), Strategy(cp=2, global_batch=1))
