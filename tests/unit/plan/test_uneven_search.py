"""The search's uneven split: first and last stage layer counts for models whose layers no
pipeline degree divides (DeepSeek-V3 and Kimi K2: 61)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from stallscope.cli.main import cli
from stallscope.plan import Cluster, PlanError, load_model
from stallscope.plan._pipeline_split import parse_split_name, split_name, uneven_split
from stallscope.plan._search import Space, best_strategy, search
from stallscope.plan._strategy import check


@pytest.mark.parametrize(
    ("layers", "pp", "v", "want"),
    [
        (61, 16, 1, (3, 2)),  # 3, 4 x 14, 2
        (61, 8, 1, (7, 6)),
        (61, 4, 1, (15, 14)),
        (61, 2, 1, (31, 30)),
        (61, 8, 2, None),  # 13 left for the ends: not two multiples of 2
        (64, 8, 1, None),  # the even split exists
        (61, 1, 1, None),
        (10, 8, 1, None),  # middle stages of 2 leave -2
    ],
)
def test_uneven_split(layers: int, pp: int, v: int, want: tuple[int, int] | None) -> None:
    got = uneven_split(layers, pp, v)
    assert got == want
    if got is not None:
        first, last = got
        assert last >= v and first % v == 0 and last % v == 0
        if pp > 2:  # the middle stages split the rest evenly, each at least the first's
            middle, left = divmod(layers - first - last, pp - 2)
            assert left == 0 and last <= first <= middle


def test_the_search_splits_61_layers_unevenly(a100: Cluster) -> None:
    m = load_model(
        {"name": "odd", "layers": 61, "hidden": 2048, "heads": 16, "seq_len": 2048, "vocab": 32000}
    )
    res = search(m, a100, 64, 256, 200, Space(zero=(1,), interleave=(1,), micro_batches=(1,)))
    splits = set(res.table["split"])
    assert {"even", "uneven 31/30"} <= splits  # pp 1 even; pp 2 uneven
    assert any(x.startswith("uneven") for x in res.table.head(10)["split"])
    for p, row in zip(res.best, res.table.iter_rows(named=True), strict=True):
        assert p.step_ns == pytest.approx(row["step_s"] * 1e9, rel=1e-6)
        assert split_name(p.strategy) == row["split"]
    s = best_strategy(res)
    check(m, s, 64)
    assert parse_split_name("uneven 3/2") == {"first_stage_layers": 3, "last_stage_layers": 2}
    only_even = search(m, a100, 64, 256, 5, Space(pipeline_split=("even",), zero=(1,)))
    assert set(only_even.table["pp"]) <= {1}  # 61 is prime
    with pytest.raises(PlanError, match="uneven"):
        Space(pipeline_split=("lopsided",))


def test_plan_cli_takes_the_uneven_split() -> None:
    r = CliRunner().invoke(
        cli,
        ["plan", "--model", "gpt3-175b", "--system", "dgx-a100", "--gpus", "64",
         "--pipeline-split", "even,uneven", "--top", "3"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(
        cli,
        ["plan", "--model", "gpt3-175b", "--system", "dgx-a100", "--gpus", "64",
         "--pipeline-split", "odd"],
    )  # fmt: skip
    assert r.exit_code == 2 and "uneven" in r.output


def test_an_uneven_model_is_told_the_first_and_last_counts() -> None:
    m = load_model("deepseek-v3")
    from stallscope.plan import Strategy

    s = Strategy(tp=1, pp=16, dp=64, micro_batch=1, global_batch=4096, ep=64)
    with pytest.raises(PlanError, match="first_stage_layers 3 and last_stage_layers 2"):
        check(m, s, 1024)
    check(m, s.with_(first_stage_layers=3, last_stage_layers=2), 1024)
