"""The torch.distributed capture backend (see stallscope.capture._hooks): on when torch.distributed is
initialised. At trace start it instruments the collectives, exchanges every rank's topology and
measures the clock offset to rank 0; at trace stop (or just before destroy_process_group) it
measures the offset again and writes both into run.json (entry["clock"]["offsets"])."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings
from typing import Any

from stallscope import _core
from stallscope.capture._clock_sync import DEFAULT_ROUNDS, Sample, measure_torch
from stallscope.exceptions import StallscopeWarning
from stallscope.io import _run_json as run_json

CLOCK_TIMEOUT_ENV = "STALLSCOPE_CLOCK_TIMEOUT_S"
CLOCK_TIMEOUT_S = 20.0  # default per exchange step: bounds the wait on a dead or hung rank


def _clock_timeout() -> float:
    try:
        return max(0.1, float(os.environ.get(CLOCK_TIMEOUT_ENV, CLOCK_TIMEOUT_S)))
    except ValueError:
        return CLOCK_TIMEOUT_S


def _dist_ready() -> bool:
    dist = sys.modules.get("torch.distributed")
    try:
        return bool(dist is not None and dist.is_available() and dist.is_initialized())
    except Exception:
        return False


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.trace: Any = None
        self.samples: list[dict[str, int]] = []
        self.problems: list[str] = []
        self.sync_group: Any = None
        self.finished = True
        self.generation = -1  # traces started in this process (keys of the store rendezvous)
        self.all_present = False
        self.plugin_base: dict[str, int] = {}  # the NCCL plugin's counters when the trace began


def _rendezvous(phase: str, payload: str) -> dict[int, str]:
    """Every tracing rank posts `payload` in the job's store and reads the others'. Ranks that
    do not post within the clock timeout (not tracing, dead) are left out and reported: a rank
    that traces alone never hangs in a collective waiting for the others."""
    import datetime

    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    store = c10d._get_default_store()
    rank, world = dist.get_rank(), dist.get_world_size()
    prefix = f"stallscope/{_state.generation}/{phase}/"
    store.set(prefix + str(rank), payload)
    keys = [prefix + str(r) for r in range(world)]
    with contextlib.suppress(Exception):  # some rank never came: take who did
        store.wait(keys, datetime.timedelta(seconds=_clock_timeout()))
    present = {r: store.get(k).decode() for r, k in enumerate(keys) if store.check([k])}
    missing = sorted(set(range(world)) - set(present))
    if missing:
        msg = f"{phase}: ranks {missing} did not take part within {_clock_timeout():.0f} s"
        _state.problems.append(msg)
        warnings.warn(f"stallscope: {msg}", StallscopeWarning, stacklevel=3)
    return present


_state = _State()


def _clock_group() -> Any:
    """A group whose backend takes CPU tensors: the default one unless it is NCCL-only."""
    import torch.distributed as dist

    backend = str(dist.get_backend())
    if "gloo" in backend or "mpi" in backend:
        return None  # the default group
    if _state.sync_group is None:
        if not _state.all_present:
            raise RuntimeError("not every rank traces: no gloo side group for the clock exchange")
        _state.sync_group = dist.new_group(backend="gloo")  # collective: every rank calls it
    return _state.sync_group


def _measure(trace: Any, when: str, peers: list[int] | None = None) -> Sample | None:
    import torch.distributed as dist

    from stallscope.torch._collectives import internal
    from stallscope.torch._record import record

    rank, world = dist.get_rank(), dist.get_world_size()
    s: Sample | None = None
    probs: list[str] = []
    if world == 1:
        s = Sample(_core.now_ns(), 0, 0, 0)
    else:
        if peers is None:
            peers = sorted(_rendezvous(f"clock-{when}", ""))
        if 0 not in peers:
            probs.append("rank 0 does not trace: no clock reference")
        else:
            try:
                group = _clock_group()
            except Exception as e:
                probs.append(str(e))
            else:
                with internal():
                    s, probs = measure_torch(
                        group,
                        rank,
                        world,
                        _core.now_ns,
                        rounds=DEFAULT_ROUNDS,
                        timeout_s=_clock_timeout(),
                        peers=peers,
                    )
    _state.problems += [f"{when}: {p}" for p in probs]
    for p in probs:
        warnings.warn(f"stallscope clock sync: {p}", StallscopeWarning, stacklevel=3)
    if s is not None:
        _state.samples.append(s.as_json())
        record(
            "clock_sync",
            "other",
            f"clock_sync:{when}",
            s.local_ns - s.rtt_ns // 2,
            s.local_ns + s.rtt_ns // 2,
            nbytes=s.rtt_ns,
            lane=_core.current_lane(),
            detail={"offset_ns": s.offset_ns, "error_ns": s.error_ns, "reference_rank": 0},
        )
    _write_clock(trace)
    return s


def _write_clock(trace: Any) -> None:
    entry = run_json.clock_offsets(
        trace.out_dir,
        trace.stem,
        method=f"cristian ping-pong over the process group, smallest round trip of {DEFAULT_ROUNDS}",
        samples=_state.samples,
        problems=_state.problems,
    )
    run_json.update_process(trace.out_dir, trace.stem, entry)


class TorchDistBackend:
    name = "torch_dist"

    def available(self) -> tuple[bool, str]:
        try:
            import torch.distributed as dist
        except ImportError:
            return False, "torch is not installed"
        if not dist.is_available():
            return False, "this torch build has no torch.distributed"
        if not dist.is_initialized():
            return False, "torch.distributed is not initialised (call init_process_group first)"
        return True, ""

    def default_on(self) -> bool:
        return _dist_ready()

    def on_start(self, trace: Any) -> dict[str, Any] | None:
        ok, why = self.available()
        if not ok:
            raise RuntimeError(why)
        import torch.distributed as dist

        from stallscope.torch import _collectives, _topology
        from stallscope.torch._instrument import before_destroy, instrument
        from stallscope.torch._nccl import plugin_stats

        ops = instrument(None)
        before_destroy(finish)
        with _state.lock:
            _state.trace, _state.samples, _state.problems, _state.finished = trace, [], [], False
            _state.generation += 1
            _state.plugin_base = plugin_stats() or {}
        import json

        posted = _rendezvous("topology", json.dumps(_topology.this_rank()))
        _state.all_present = len(posted) == dist.get_world_size()
        _collectives.topology = _topology.from_posts(posted, dist.get_world_size())
        _collectives._groups.clear()  # nnodes now known
        topo = _collectives.topology.as_json(dist.get_rank())
        run_json.update_process(trace.out_dir, trace.stem, {"topology": topo})
        _measure(trace, "start", peers=sorted(posted))
        return {"ops": ops, "backend": str(dist.get_backend()), "nnodes": topo["nnodes"]}

    def on_stop(self, trace: Any) -> dict[str, Any] | None:
        finish(trace)
        from stallscope.torch._nccl import flush_plugin

        stats = flush_plugin()
        meta: dict[str, Any] = {"clock_samples": len(_state.samples)}
        if stats is not None:
            # The plugin counts for its whole life in the process: this trace's share.
            base = _state.plugin_base
            mine = {k: v - base.get(k, 0) for k, v in stats.items() if k != "communicators"}
            meta["nccl_plugin"] = {**mine, "communicators": stats["communicators"]}
            meta["drops"] = {"nccl_plugin_lost": mine["lost"]}
        if _state.problems:
            meta["problems"] = list(_state.problems)
        return meta


def finish(trace: Any = None) -> None:
    """The stop-side clock measurement, once per trace, while the process group still exists."""
    with _state.lock:
        if _state.finished or (trace is not None and trace is not _state.trace):
            return
        _state.finished = True
        t = _state.trace
    if t is None or not _dist_ready():
        return
    try:
        _measure(t, "stop")
    except Exception as e:  # never break the end of training
        warnings.warn(f"stallscope clock sync at stop failed: {e}", StallscopeWarning, stacklevel=2)


BACKEND = TorchDistBackend()
