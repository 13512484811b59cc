"""Running one configuration of the job, traced: its ranks on this machine (one node, talking
over loopback) or on the test bed's emulated nodes (network namespaces, shaped links), each
rank tracing itself into the configuration's run directory (`stallscope profile`'s
machinery), bounded in time; and the page cache prepared for cached and cold runs."""

from __future__ import annotations

import os
import socket
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stallscope._utils.procs import stop_process_groups
from stallscope.capture._launch import profile_env
from stallscope.data import _cache
from stallscope.data._env import (
    CACHE_ENV,
    DATA_ENV,
    DATASET_ENV,
    DROPPED_ENV,
    STEPS_ENV,
)
from stallscope.differential._configs import RunConfig
from stallscope.exceptions import AnalyzeError

COLD_METHODS = ("auto", "drop-caches", "fadvise")


@dataclass
class Launched:
    """A configuration that ran: where its trace is, how long it took (s, wall clock), its
    ranks' output (tail), and what analyze did to the page cache before it (None: nothing)."""

    config: RunConfig
    run_dir: Path
    wall_s: float
    outputs: list[str]
    cache: _cache.CacheAction | None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _env(cfg: RunConfig, steps: int, dataset: Sequence[Path], dropped: bool) -> dict[str, str]:
    env = {DATA_ENV: cfg.data, STEPS_ENV: str(steps)}
    if cfg.cache is not None:
        env[CACHE_ENV] = cfg.cache
    if dataset:
        env[DATASET_ENV] = os.pathsep.join(str(p) for p in dataset)
    if dropped:
        env[DROPPED_ENV] = "drop_caches"
    # On a CPU a device is a core: one intra-op thread per rank, in every configuration, so that
    # the 1-device run does not compute on cores the G-device runs must share.
    env["OMP_NUM_THREADS"] = os.environ.get("OMP_NUM_THREADS", "1")
    return env


def prepare_cache(cfg: RunConfig, dataset: Sequence[Path], cold: str) -> _cache.CacheAction | None:
    """Before a cached run: read the declared files through; before a cold run: drop the page
    cache (``drop-caches``, or ``auto`` as root) and evict the declared files (fadvise). None
    when there was nothing to do here (the script's own dataset_files() still does its part)."""
    if cfg.cache is None:
        return None
    files = _cache.expand(dataset) if dataset else []
    if cfg.cache == "cached":
        return _cache.warm(files) if files else None
    if cold not in COLD_METHODS:
        raise AnalyzeError(f"unknown cold-cache method {cold!r}: use one of {COLD_METHODS}")
    drop = cold == "drop-caches" or (cold == "auto" and _cache.can_drop_caches())
    if drop:
        before = _cache.resident_fraction(files)
        _cache.drop_page_cache()
        size = sum(f.stat().st_size for f in files)
        return _cache.CacheAction(
            "cold", "drop_caches", len(files), size, before, _cache.resident_fraction(files)
        )
    return _cache.evict(files) if files else None


def _wait(procs: list[subprocess.Popen[bytes]], deadline: float, grace_s: float = 5.0) -> bool:
    """Until all exit (True), a failure's grace ends (True) or the deadline (False)."""
    failed_at: float | None = None
    while time.monotonic() < deadline:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            return True
        if failed_at is None and any(c not in (None, 0) for c in codes):
            failed_at = time.monotonic()
        if failed_at is not None and time.monotonic() - failed_at > grace_s:
            return True
        time.sleep(0.05)
    return False


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_bytes()[-limit:].decode(errors="replace")
    except OSError:
        return ""


def _run_local(
    cfg: RunConfig, argv: Sequence[str], env: Mapping[str, str], logs: Path, timeout_s: float
) -> tuple[list[int | None], bool]:
    """cfg's ranks as processes of this machine (one node), torchrun's rendezvous variables."""
    port = _free_port()
    procs: list[subprocess.Popen[bytes]] = []
    files: list[Any] = []
    try:
        for rank in range(cfg.ranks):
            full = dict(os.environ)
            full.update(env)
            full.update(
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(port),
                RANK=str(rank),
                WORLD_SIZE=str(cfg.ranks),
                LOCAL_RANK=str(rank),
                LOCAL_WORLD_SIZE=str(cfg.ranks),
                GROUP_RANK="0",
                NODE_RANK="0",
            )
            out = open(logs / f"rank{rank}.log", "wb")  # noqa: SIM115 - closed below
            files.append(out)
            procs.append(
                subprocess.Popen(
                    list(argv),
                    env=full,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    start_new_session=True,  # stopped as a whole group
                )
            )
        finished = _wait(procs, time.monotonic() + timeout_s)
    except OSError as e:
        raise AnalyzeError(f"cannot start {argv[0]!r}: {e}") from None
    finally:
        stop_process_groups(procs)
        for f in files:
            f.close()
    return [p.returncode for p in procs], not finished


def _run_testbed(
    cfg: RunConfig, argv: Sequence[str], env: Mapping[str, str], logs: Path, timeout_s: float
) -> tuple[list[int | None], bool]:
    """cfg's ranks on the test bed: cfg.nodes network namespaces, links shaped to cfg.rate."""
    from stallscope.testbed import Testbed, TestbedError

    rate = None if cfg.rate is None or cfg.rate.lower() == "none" else cfg.rate
    try:
        with Testbed(cfg.nodes, cfg.ranks_per_node, rate, master_port=_free_port()) as tb:
            res = tb.run(argv, timeout_s=timeout_s, env=env, log_dir=logs)
    except TestbedError as e:
        raise AnalyzeError(f"run {cfg.name}: the test bed failed: {e}") from None
    return res.returncodes, res.timed_out


def launch(
    cfg: RunConfig,
    argv: Sequence[str],
    out: Path,
    *,
    steps: int,
    timeout_s: float,
    dataset: Sequence[Path] = (),
    cold: str = "auto",
) -> Launched:
    """Run `argv` as cfg says, traced into ``out/runs/<name>`` (logs in ``out/logs/<name>``),
    with STALLSCOPE_DATA / STALLSCOPE_CACHE / STALLSCOPE_STEPS (`steps`: batches in all, warm-up
    included) set for it. Raises AnalyzeError naming the configuration and the failed ranks'
    output when a rank fails or the run passes `timeout_s`."""
    run_dir = out / "runs" / cfg.name.replace("@", "-")
    logs = out / "logs" / cfg.name.replace("@", "-")
    for d in (run_dir, logs):
        d.mkdir(parents=True, exist_ok=True)
    cache = prepare_cache(cfg, dataset, cold)
    dropped = cache is not None and cache.method == "drop_caches"
    env = _env(cfg, steps, dataset, dropped)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="stallscope-analyze-") as site:
        env.update(profile_env(run_dir, Path(site), launcher=False, overwrite=True))
        run = _run_testbed if cfg.testbed else _run_local
        codes, timed_out = run(cfg, argv, env, logs, timeout_s)
    wall = time.monotonic() - t0
    outputs = [_tail(logs / f"rank{r}.log") for r in range(cfg.ranks)]
    if timed_out or any(c != 0 for c in codes):
        bad = [r for r, c in enumerate(codes) if c != 0]
        why = f"passed its {timeout_s:.0f} s limit" if timed_out else f"failed on rank(s) {bad}"
        shown = bad[:2] or [0]
        tails = "\n".join(f"--- rank {r} (exit {codes[r]}):\n{outputs[r][-2000:]}" for r in shown)
        raise AnalyzeError(
            f"run {cfg.name} ({cfg.ranks} rank(s) on {cfg.nodes} node(s), data {cfg.data}) "
            f"{why}; every rank's output is in {logs}\n{tails}"
        )
    return Launched(cfg, run_dir, wall, outputs, cache)
