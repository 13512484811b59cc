"""The HTML report's sections: each renders from its frames, says why when they are missing, and
the page is one file that fetches nothing."""

from __future__ import annotations

import re
import time
from pathlib import Path

import polars as pl
import pytest
from click.testing import CliRunner

import stallscope
import stallscope.report as sr
from stallscope.analysis import STALL_COLUMNS, STALL_MEANINGS
from stallscope.cli.main import cli
from stallscope.exceptions import ReportError
from stallscope.report import _bandwidth, _prediction, _summary

REPO = Path(__file__).resolve().parents[3]
H200 = REPO / "tests" / "data" / "kineto" / "h200_transformer_1rank"
CALIBRATION = REPO / "bench" / "results" / "comm_calibration_example.json"
SECTION_IDS = [s.id for s in sr.SECTIONS]

pytest.importorskip("matplotlib", reason="the HTML report's plots need matplotlib (report extra)")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("report") / "run"
    with stallscope.trace(run):
        for _ in stallscope.loader(range(4), mark_steps=True):
            with stallscope.region("forward", category="compute"):
                time.sleep(0.002)
    return run


def prediction_frame() -> pl.DataFrame:
    """Rows as stallscope.predict.predict gives them (nodes, ranks_per_node, ..., stall columns)."""
    rows = []
    for nodes, step in ((4, 30e6), (8, 24e6)):
        stalls = dict.fromkeys(STALL_COLUMNS, 0)
        stalls |= {"compute_ns": int(step * 0.6), "network_ns": int(step * 0.3)}
        stalls["host_ns"] = int(step) - stalls["compute_ns"] - stalls["network_ns"]
        rows.append(
            {"nodes": nodes, "ranks_per_node": 2, "rate_bps": 2e8, "step_ns": int(step), **stalls}
        )
    return pl.DataFrame(rows)


def pareto_frame() -> pl.DataFrame:
    """Rows as stallscope.recommend's Recommendation.pareto gives them."""
    return pl.DataFrame(
        {
            "config": ["4x p4d.24xlarge", "2x p4d.24xlarge"],
            "market": ["on-demand", "spot"],
            "cloud": ["aws", "aws"],
            "region": ["us-east-1", "us-east-1"],
            "ranks": [32, 16],
            "hours": [10.0, 19.0],
            "cost": [1300.0, 500.0],
            "step_ns": [100_000_000, 190_000_000],
            "risk": [0.0, 0.1],
            "meets": [True, True],
            "mix": [None, None],
        }
    )


def test_a_traced_run_renders_its_sections_and_names_the_empty_ones(run_dir: Path) -> None:
    data = sr.report_data(stallscope.load(run_dir), sr.RunFacts(path=str(run_dir)))
    page = sr.render_html(data)
    for sid in SECTION_IDS:
        assert f'data-section="{sid}"' in page
    assert page.count("<svg") >= 2  # stall bars, slowest step
    for sid in ("stalls", "timeline", "legend"):
        assert f'data-section="{sid}" data-empty' not in page
    for sid in ("bandwidth", "stragglers", "hta", "prediction", "pareto"):
        assert f'data-section="{sid}" data-empty="1"' in page
    assert "Sections without data: Collective bandwidth" in page
    assert "1 rank ran 4 steps" in page
    for meaning in STALL_MEANINGS.values():
        assert meaning.replace("'", "&#x27;") in page


def test_the_page_fetches_nothing(run_dir: Path) -> None:
    data = sr.report_data(stallscope.load(run_dir), calibration=CALIBRATION)
    page = sr.render_html(data)
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert not re.search(r"url\((?!#)", page)  # url(#id): a clip path of the page itself
    assert "@import" not in page and "<link" not in page
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))  # one id space for every inlined SVG
    assert "<!DOCTYPE svg" not in page  # the SVGs' own preambles are stripped


def test_gpu_traces_get_hta_views() -> None:
    events = stallscope.import_kineto(H200)
    data = sr.report_data(events)
    assert data.hta is not None
    page = sr.render_html(data)
    assert 'data-section="hta" data-empty' not in page
    assert "Kernel time by type" in page


def test_prediction_and_pareto_render_from_their_frames(run_dir: Path) -> None:
    data = sr.report_data(stallscope.load(run_dir))
    data.prediction = prediction_frame()
    data.comparison = pl.DataFrame(
        {
            "column": ["step_ns", "compute_ns"],
            "predicted_ns": [30e6, 18e6],
            "measured_ns": [28e6, 17e6],
            "error_ns": [2e6, 1e6],
            "error_pct": [7.1, 5.9],
        }
    )
    data.pareto = pareto_frame()
    page = sr.render_html(data)
    for sid in ("prediction", "pareto"):
        assert f'data-section="{sid}" data-empty' not in page
    assert "4 x 2 @ 0.2 Gb/s" in page and "measured" in page
    assert "+7.1%" in page
    assert "4x p4d.24xlarge" in page and "$1,300" in page
    assert _prediction.config_label({"config": "x"}) == "x"


def test_collective_bandwidth_is_nccl_tests_bus_bandwidth() -> None:
    coll = pl.DataFrame(
        {
            "name": ["all_reduce", "all_gather", "barrier", "allreduce"],
            "bytes": [1 << 20, 1 << 20, 0, 1 << 20],
            "group_size": [4, 4, 4, 2],
            "nnodes": [2, 2, 2, 1],
            "transfer_ns": [1_000_000, 1_000_000, 5, 0],
        }
    )
    m = _bandwidth.measured(coll)
    assert m["collective"].to_list() == ["all_reduce", "all_gather"]  # barrier, 0 time: out
    ar, ag = m.row(0, named=True), m.row(1, named=True)
    assert ar["tier"] == "inter_node"
    assert ar["busbw_Bps"] == pytest.approx((1 << 20) / 1e-3 * 2 * 3 / 4)
    assert ag["nbytes"] == 4 * (1 << 20)  # one rank's input of 4
    assert ag["busbw_Bps"] == pytest.approx(4 * (1 << 20) / 1e-3 * 3 / 4)


def test_a_calibration_is_drawn_over_the_collectives(run_dir: Path) -> None:
    coll = pl.DataFrame(
        {
            "name": ["all_reduce"] * 3,
            "bytes": [1 << 16, 1 << 20, 1 << 23],
            "group_size": [2, 2, 2],
            "nnodes": [1, 1, 1],
            "transfer_ns": [400_000, 900_000, 4_500_000],
        }
    )
    data = sr.ReportData(collectives=coll, calibration=sr.calibration_fits(CALIBRATION))
    body = _bandwidth.render(data)
    assert isinstance(body, str)
    assert "all_reduce fit (intra_node, 2 ranks)" in body
    with pytest.raises(ReportError, match="does not exist"):
        sr.calibration_fits(REPO / "no-such-calibration.json")


def test_the_summary_sentence() -> None:
    table = pl.DataFrame(
        {
            "rank": [0, 1, 0, 1],
            "step": [1, 1, 2, 2],
            "step_ns": [10_000_000, 12_000_000, 10_000_000, 10_000_000],
            **{c: [0, 0, 0, 0] for c in STALL_COLUMNS},
        }
    ).with_columns(
        compute_ns=pl.col("step_ns") // 2, sync_wait_ns=pl.col("step_ns") - pl.col("step_ns") // 2
    )
    data = sr.ReportData(sr.RunFacts(world_size=4, steps_found=["found from X"]), table)
    text = _summary.summary_sentence(data)
    assert text.startswith("2 ranks (of 4) ran 2 steps of 11.00 ms")
    assert "step 1 was the slowest, 12.00 ms on rank 1" in text
    assert "compute 50.0%, communication 50.0% (sync wait 50.0%)" in text
    assert text.endswith("Steps from X.")


def test_report_html_cli_and_its_errors(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "new" / "r.html"
    res = CliRunner().invoke(cli, ["report", str(run_dir), "--html", str(out)])
    assert res.exit_code == 0, res.output
    assert f"HTML report: {out}" in res.output
    assert out.read_text().startswith("<!doctype html>")
    bad = tmp_path / "cal.json"
    bad.write_text('{"format": "other"}')
    res = CliRunner().invoke(
        cli, ["report", str(run_dir), "--html", str(out), "--calibration", str(bad)]
    )
    assert res.exit_code == 1 and "not a stallscope calibration file" in res.output


def test_without_matplotlib_the_error_says_how_to_install_it(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    with pytest.raises(ReportError, match=r"pip install \"stallscope\[report\]\""):
        sr.render_html(sr.report_data(stallscope.load(run_dir)))


def test_the_pareto_plot_names_spread_points_not_a_crowd() -> None:
    from stallscope.report._pareto import MAX_LABELS, _spread

    # the fastest, 30 near one another in the middle (log axes), the cheapest
    rows: list[tuple[float, float, object]] = [(0.01, 10.0, "fast")]
    rows += [(1.0 + i / 100, 0.5 - i / 1000, f"mid{i}") for i in range(30)]
    rows.append((100.0, 0.01, "cheap"))
    named = [rows[i][2] for i in _spread(rows, log=True)]
    assert named[0] == "fast" and named[-1] == "cheap"
    assert len(named) == 3  # one of the crowd
    many = [(10.0**i, 10.0 ** (-i), i) for i in range(20)]  # evenly spread over decades
    assert len(_spread(many, log=True)) == MAX_LABELS
    assert _spread([(1.0, 1.0, "only")], log=False) == [0]
