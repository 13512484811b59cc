"""Every verb's exit status: 0 when it did its job, 1 with a one-line reason when it could not
(never a traceback), 2 for a usage error; `-o` is `--out` wherever there is one; output files
get their missing folders. (profile's statuses with a real program: tests/unit/torch_dist.)"""

from __future__ import annotations

import time
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result

import stallscope
from stallscope.cli.main import cli

REPO = Path(__file__).resolve().parents[3]
H200 = REPO / "tests" / "data" / "kineto" / "h200_transformer_1rank"


def _run(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def _clean_failure(res: Result, code: int, *words: str) -> None:
    assert res.exit_code == code, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.output
    for w in words:
        assert w in res.output, res.output


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("codes") / "run"
    with stallscope.trace(run):
        for _ in stallscope.loader(range(3), mark_steps=True):
            with stallscope.region("forward", category="compute"):
                time.sleep(0.001)
    return run


def _verbs() -> list[str]:
    return sorted(cli.commands)


def test_every_verb_has_help_and_a_whole_summary() -> None:
    res = _run("--help")
    assert res.exit_code == 0
    for verb in _verbs():
        assert _run(verb, "--help").exit_code == 0
        command = cli.commands[verb]
        summary = command.get_short_help_str(limit=80)
        assert not summary.endswith("..."), (verb, summary)
        assert not summary.endswith("e.g."), (verb, summary)


def test_out_has_the_short_form_o_wherever_it_exists() -> None:
    def commands(group: click.Group) -> list[click.Command]:
        out: list[click.Command] = []
        for c in group.commands.values():
            out += commands(c) if isinstance(c, click.Group) else [c]
        return out

    with_out = []
    for c in commands(cli):
        for p in c.params:
            if isinstance(p, click.Option) and "--out" in p.opts:
                assert "-o" in p.opts, c.name
                with_out.append(c.name)
    assert {"demo", "profile", "import", "analyze"} <= set(with_out)


def test_usage_errors_exit_2() -> None:
    for args in (
        ("nosuchverb",),
        ("report",),
        ("report", "/no/such/run"),
        ("export", "/no/such/run", "--perfetto", "t.json"),
        ("import", "/no/such/trace.json", "-o", "x"),
        ("profile", "-o", "x"),  # no command
        ("demo", "--ranks", "0"),
        ("bench", "comm", "-b", "lots"),
        ("testbed",),  # no command
        ("catalog", "--gpu"),
        ("predict", "--nodes"),
        ("recommend",),  # no run
        ("plan", "--gpus", "8"),  # no model or system
        ("whatif", "--gpus", "0"),
        ("analyze", "--steps", "1", "--", "true"),
    ):
        res = _run(*args)
        assert res.exit_code == 2, (args, res.output)
        assert "Traceback" not in res.output


def test_report_codes(run_dir: Path, tmp_path: Path) -> None:
    assert _run("report", str(run_dir)).exit_code == 0
    (tmp_path / "notes.txt").write_text("x")
    _clean_failure(_run("report", str(tmp_path)), 1, "neither a stallscope run directory")


def test_export_creates_missing_folders(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "missing" / "dir" / "t.json"
    res = _run("export", str(run_dir), "--perfetto", str(out))
    assert res.exit_code == 0, res.output
    assert out.stat().st_size > 0
    _clean_failure(_run("export", str(run_dir), "--perfetto", str(tmp_path)), 2, "is a directory")
    (tmp_path / "file").write_text("x")
    blocked = tmp_path / "file" / "t.json"  # a parent that is a file
    _clean_failure(_run("export", str(run_dir), "--perfetto", str(blocked)), 1, "cannot create")


def test_import_codes(tmp_path: Path) -> None:
    out = tmp_path / "new" / "run"
    res = _run("import", str(H200), "-o", str(out))
    assert res.exit_code == 0, res.output
    assert (out / "rank-00000.parquet").exists()
    _clean_failure(_run("import", str(H200), "-o", str(out)), 1, "already holds event files")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    _clean_failure(_run("import", str(bad), "-o", str(tmp_path / "r2")), 1, str(bad))


def test_bench_rejects_an_unwritable_output_before_the_sweep(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    res = _run("bench", "comm", "--json", str(tmp_path / "file" / "r.json"))
    _clean_failure(res, 1, "cannot create the folder")


def test_catalog_codes(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "rows.json"
    res = _run("catalog", "--gpu", "H100", "--json", str(out))
    assert res.exit_code == 0, res.output
    assert out.stat().st_size > 0
    _clean_failure(_run("catalog", "--gpu", "NoSuchGPU"), 2, "unknown GPU")
    # An empty selection is an answer, said on stderr, not a failure (test_catalog_cli.py)
    none = _run("catalog", "--gpu", "H100", "--region", "mars-1")
    assert none.exit_code == 0 and "no instance" in none.output


def test_demo_and_testbed_argument_checks() -> None:
    # Their runs are tested in test_demo.py and tests/unit/testbed (they need torch / root).
    assert "-o, --out" in _run("demo", "--help").output
    _clean_failure(_run("testbed", "--nodes", "2"), 2, "give the command to run")


def test_plan_predict_and_whatif_outputs_get_their_folders(tmp_path: Path) -> None:
    import json

    model = {"layers": 4, "hidden": 512, "heads": 8, "seq_len": 512, "vocab": 32000, "name": "m"}
    system = {
        "name": "s",
        "gpu": "A100-80GB",
        "gpus_per_node": 8,
        "intra_node_GBps": 300,
        "inter_node_Gbps": 1600,
        "peak_tflops": {"bf16": 312},
        "hbm_GBps": 2039,
        "hbm_GB": 80,
    }
    m, s = tmp_path / "m.json", tmp_path / "s.json"
    m.write_text(json.dumps(model))
    s.write_text(json.dumps(system))
    out = tmp_path / "deep" / "er" / "plan.json"
    res = _run("plan", "--model", str(m), "--system", str(s), "--gpus", "8", "--json", str(out))
    assert res.exit_code == 0, res.output
    assert out.stat().st_size > 0
    (tmp_path / "file").write_text("x")
    blocked = tmp_path / "file" / "plan.json"
    res = _run("plan", "--model", str(m), "--system", str(s), "--gpus", "8", "--json", str(blocked))
    _clean_failure(res, 1, "cannot create the folder")


def test_analyze_rejects_an_unwritable_json_before_running(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    res = _run("analyze", "--json", str(tmp_path / "file" / "r.json"), "--", "true")
    _clean_failure(res, 1, "cannot create the folder")


# One bad input per verb at least: a one-line reason naming the problem, exit 1 (or 2 for a
# usage error), never a traceback. "{run}" is a finished full-mode run without compute regions,
# "{empty}" an empty folder, "{file}" a plain file, "{bad}" a truncated JSON file.
BAD_INPUTS: list[tuple[tuple[str, ...], int, str]] = [
    (("analyze", "--", "/no/such/cmd"), 1, "cannot start"),
    (("bench", "comm", "-c", "nosuch"), 2, "unknown collective"),
    (("capture", "{run}", "--steps", "2"), 1, "no traced process is running"),
    (("catalog", "--catalog", "{bad}"), 1, "not valid JSON"),
    (("demo", "-o", "{file}/d"), 1, "cannot create the folder"),
    (("demo", "-o", "{run}"), 1, "already holds a run"),
    (("export", "{empty}", "--perfetto", "t.json"), 1, "neither a stallscope run directory"),
    (("import", "{bad}", "-o", "{empty}/r"), 1, "not valid JSON"),
    (("plan", "--model", "nosuch", "--system", "dgx-a100", "--gpus", "8"), 1, "unknown model"),
    (("predict", "{empty}"), 1, "no .json or .json.gz trace files"),
    (("profile", "-o", "{run}", "--", "true"), 1, "already holds a run"),
    (("profile", "-o", "{file}/r", "--", "true"), 1, "cannot prepare the run directory"),
    (("profile", "-o", "{empty}/p", "--", "/no/such/cmd"), 1, "cannot start"),
    (("profile", "-o", "{empty}/q", "--", "true"), 1, "no process was traced"),
    (("recommend", "{run}", "--steps", "10", "--time-budget", "1h"), 1, "on CPU threads"),
    (("report", "{bad}"), 1, "not valid JSON"),
    (("report", "{run}", "--calibration", "{bad}"), 2, "add --html FILE"),
    (("report", "{run}", "--calibration", "{bad}", "--html", "{empty}/r.html"), 1, "not valid"),
    (("report", "{run}", "--html", "{file}/r.html"), 1, "cannot create the folder"),
    (("testbed", "--nodes", "0", "--", "true"), 2, "--nodes"),
    (("top", "{run}", "--once"), 1, "no per-step summary"),
    (("whatif", "--model", "gpt3-175b", "--system", "nosuch", "--gpus", "8"), 1, "unknown system"),
]


def test_every_verb_has_a_bad_input_case() -> None:
    assert {args[0] for args, _, _ in BAD_INPUTS} == set(_verbs())


@pytest.mark.parametrize(("args", "code", "words"), BAD_INPUTS, ids=lambda v: None)
def test_bad_input_exits_nonzero_with_the_reason(
    args: tuple[str, ...], code: int, words: str, run_dir: Path, tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("x")
    (tmp_path / "bad.json").write_text('{"a":')
    (tmp_path / "empty").mkdir()
    where = {"run": run_dir, "empty": tmp_path / "empty", "file": tmp_path / "file"}
    where["bad"] = tmp_path / "bad.json"
    filled = [a.format(**{k: str(v) for k, v in where.items()}) for a in args]
    _clean_failure(_run(*filled), code, words)


@pytest.mark.parametrize(
    "argv",
    [
        ("report", "{run}"),
        ("export", "{run}", "--perfetto", "{tmp}/t.json.gz"),
        ("predict", "{run}", "--nodes", "2", "--rate", "10gbit"),
        ("recommend", "{run}", "--measured-device", "T4"),
    ],
)
def test_a_truncated_rank_file_is_one_line_for_every_verb_that_loads_a_run(
    run_dir: Path, tmp_path: Path, argv: tuple[str, ...]
) -> None:
    """A rank file cut short (its process died mid-write) stops each verb with the loader's
    message and its fix, whether or not the verb words load errors itself."""
    import shutil

    broken = tmp_path / "run"
    shutil.copytree(run_dir, broken)
    rank = sorted(broken.glob("rank-*.parquet"))[0]
    rank.write_bytes(rank.read_bytes()[:100])
    args = [a.format(run=broken, tmp=tmp_path) for a in argv]
    _clean_failure(_run(*args), 1, "truncated or not a Parquet file", "Move it aside")
