"""The HTML report in a real browser (headless Chromium): it loads with no console error, no
exception and no request beyond its own file, and every section is there with its content. The
screenshot is kept in tests/artifacts/ (git-ignored) for a look."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import stallscope
import stallscope.report as sr
from stallscope._schema import conform
from tests.unit.report.chromium import find, load
from tests.unit.report.test_sections import (
    CALIBRATION,
    H200,
    SECTION_IDS,
    pareto_frame,
    prediction_frame,
)

pytest.importorskip("matplotlib", reason="the HTML report's plots need matplotlib (report extra)")
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"
MS = 1_000_000


def two_ranks() -> pl.DataFrame:
    """Six 10 ms steps on two ranks: a batch wait, a compute region, then an all-reduce of a
    growing size that rank 1 reaches late every other step."""
    rows = []
    for rank in (0, 1):
        for i in range(6):
            t = i * 10 * MS
            late = 2 * MS if rank == 1 and i % 2 else 0
            nbytes = 1 << (16 + i)
            rows += [
                (rank, "step", "host", "step", t, t, i + 1, None),
                (rank, "data_wait", "data", "next_batch", t, t + MS, 0, None),
                (rank, "region", "compute", "forward", t + MS, t + 5 * MS + late, 0, None),
                (
                    rank,
                    "collective",
                    "comm",
                    "all_reduce",
                    t + 5 * MS + late,
                    t + 9 * MS,
                    i,
                    f"group=pg0;group_size=2;nnodes=1;bytes={nbytes}",
                ),
            ]
        rows.append((rank, "step", "host", "step", 60 * MS, 60 * MS, 7, None))
    cols = ("rank", "kind", "category", "name", "start_ns", "end_ns", "correlation", "detail")
    frame = pl.DataFrame([dict(zip(cols, r, strict=True)) for r in rows])
    sizes = pl.col("detail").str.extract(r"bytes=(\d+)").cast(pl.Int64).fill_null(0)
    return conform(frame.with_columns(bytes=sizes, lane=pl.lit(1), device=pl.lit(-1))).collect()


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    events = two_ranks()
    facts = sr.RunFacts(path="runs/example", events=events.height, world_size=2)
    facts.steps_found = ["marked by the program (stallscope.step() or loader(mark_steps=True))"]
    data = sr.report_data(events, facts, calibration=CALIBRATION)
    data.hta = sr.report_data(stallscope.import_kineto(H200)).hta  # a GPU trace's views
    data.prediction = prediction_frame()
    data.pareto = pareto_frame()
    out = tmp_path_factory.mktemp("html") / "report.html"
    return sr.write_html(data, out)


@pytest.mark.skipif(
    find() is None,
    reason="no Chromium to load the report in (apt install chromium; .ci/run installs it)",
)
def test_the_report_loads_in_chromium_with_every_section(page: Path) -> None:
    checks = (
        "Array.from(document.querySelectorAll('section[data-section]')).map(s => s.id)",
        "Array.from(document.querySelectorAll('section[data-empty]')).map(s => s.id)",
        "Array.from(document.querySelectorAll('section')).map("
        "s => s.querySelectorAll('svg').length)",
        "document.getElementById('summary').textContent",
        # the tables sort: click a numeric header twice and read the first cell
        "(() => { const th = document.querySelector('#stragglers th:nth-child(3)');"
        " th.click(); th.click();"
        " return th.closest('table').tBodies[0].rows[0].cells[2].dataset.v; })()",
    )
    run = load(page, checks)
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "report.png"
    shot.write_bytes(run.screenshot)
    print(f"screenshot of the HTML report: {shot}")
    assert run.errors == [], run.errors
    assert run.requests == [page.resolve().as_uri()]  # nothing fetched but the page itself
    ids, empty, svgs, summary, top = (run.values[c] for c in checks)
    assert ids == SECTION_IDS
    assert empty == []  # every section has data here
    assert dict(zip(ids, svgs, strict=True)) == {
        "stalls": 1,
        "timeline": 1,
        "bandwidth": 1,
        "stragglers": 1,
        "hta": 1,
        "prediction": 1,
        "pareto": 1,
        "legend": 0,
    }
    assert summary.startswith("2 ranks ran 6 steps")
    assert int(top) == 2 * MS  # descending: rank 1's 2 ms of others' wait comes first
    assert run.screenshot[:8] == b"\x89PNG\r\n\x1a\n" and len(run.screenshot) > 50_000
