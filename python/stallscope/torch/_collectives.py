"""torch.distributed's collectives and point-to-point calls, timed: op, bytes, group ranks,
per-group sequence number, start and end (for async calls, when the work completes).

The wrappers replace the functions in torch.distributed and torch.distributed.distributed_c10d
(so helpers that call them by module name are seen too). Only the outermost call is recorded;
calls stallscope makes itself (clock exchange, topology) are not. Sequence numbers count every
call on a group while instrumented, recording or not, so they stay equal across ranks.

Events (the contract of stallscope.analysis._collectives): kind ``collective`` / ``p2p``,
category ``comm``, correlation = per-group sequence number, detail group, group_size, nnodes,
ranks, backend, async. On an NCCL group the NCCL profiler plugin records the transfer itself, so
the Python call is recorded as a host region ``c10d:<op>`` (the enqueue) instead.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import itertools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from stallscope import _core
from stallscope._schema import CATEGORY_ID, KIND_ID, format_detail
from stallscope.torch._record import intern
from stallscope.torch._topology import Topology

COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "broadcast",
    "all_to_all",
    "all_to_all_single",
    "barrier",
)
P2P = ("send", "recv", "isend", "irecv")
OPS = COLLECTIVES + P2P

_tls = threading.local()
_state_lock = threading.Lock()
# group id / (src, dst) -> its sequence numbers: next() of an itertools.count is one C call,
# atomic under the GIL (no lock per call)
_seq: dict[str, Iterator[int]] = {}
_p2p_seq: dict[tuple[int, int], Iterator[int]] = {}
_originals: dict[str, Callable[..., Any]] = {}
topology = Topology()


@contextlib.contextmanager
def internal() -> Iterator[None]:
    """Calls made inside are neither recorded nor counted (stallscope's own traffic)."""
    prev = getattr(_tls, "busy", False)
    _tls.busy = True
    try:
        yield
    finally:
        _tls.busy = prev


@dataclass(frozen=True)
class GroupInfo:
    gid: str
    ranks: tuple[int, ...]
    backend: str

    def detail(self) -> dict[str, object]:
        return {
            "group": self.gid,
            "group_size": len(self.ranks),
            "nnodes": topology.nodes_spanned(list(self.ranks)),
            "ranks": _ranks_text(self.ranks),
            "backend": self.backend,
        }


def _ranks_text(ranks: tuple[int, ...]) -> str:
    if ranks and list(ranks) == list(range(ranks[0], ranks[0] + len(ranks))):
        return f"{ranks[0]}-{ranks[-1]}" if len(ranks) > 1 else str(ranks[0])
    return ",".join(map(str, ranks))


_groups: dict[int, GroupInfo] = {}
_default: list[GroupInfo] = []  # the default group's, once known (reset_groups forgets it)


def group_info(group: Any) -> GroupInfo:
    if group is None and _default:
        return _default[0]
    info = _groups.get(id(group)) if group is not None else None
    if info is not None:
        return info
    info = _new_group_info(group)
    if group is None:
        _default[:] = [info]
    return info


def _new_group_info(group: Any) -> GroupInfo:
    import torch.distributed as dist

    pg = group if group is not None else dist.distributed_c10d._get_default_group()
    info = _groups.get(id(pg))
    if info is not None:
        return info
    ranks = tuple(dist.get_process_group_ranks(pg))
    name = str(getattr(pg, "group_name", "") or "")
    gid = "pg" + "".join(c if c.isalnum() or c in "-_." else "_" for c in name) if name else ""
    if not gid:
        gid = "pg-" + _ranks_text(ranks)
    try:
        backend = str(dist.get_backend(pg))
    except Exception:
        backend = "?"
    info = GroupInfo(gid, ranks, backend)
    _groups[id(pg)] = info
    return info


def _nbytes(t: Any) -> int:
    if isinstance(t, (list, tuple)):
        return sum(_nbytes(x) for x in t)
    try:
        return int(t.numel()) * int(t.element_size())
    except AttributeError:
        return 0


# op -> the argument whose size is this rank's payload
_PAYLOAD = {
    "all_reduce": "tensor",
    "all_gather": "tensor",
    "all_gather_into_tensor": "input_tensor",
    "reduce_scatter": "input_list",
    "reduce_scatter_tensor": "input",
    "broadcast": "tensor",
    "all_to_all": "input_tensor_list",
    "all_to_all_single": "input",
    "barrier": "",
    "send": "tensor",
    "recv": "tensor",
    "isend": "tensor",
    "irecv": "tensor",
}


Getter = Callable[[tuple[Any, ...], dict[str, Any], str], Any]


def _getter(func: Callable[..., Any]) -> Getter:
    """get(args, kwargs, name): the value `func` would see for parameter `name` in the call
    func(*args, **kwargs) (its default when not passed), without inspect's bind (2-3 µs a
    call, the most of what the wrapper cost)."""
    params = list(inspect.signature(func).parameters.values())
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    index = {p.name: i for i, p in enumerate(params) if p.kind in positional}
    defaults = {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}

    def get(args: tuple[Any, ...], kwargs: dict[str, Any], name: str) -> Any:
        if name in kwargs:
            return kwargs[name]
        i = index.get(name)
        if i is not None and i < len(args):
            return args[i]
        return defaults.get(name)

    return get


def _peer(op: str, get: Getter, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
    import torch.distributed as dist

    key = "dst" if op in ("send", "isend") else "src"
    peer = get(args, kwargs, key)
    group_peer = get(args, kwargs, "group_" + key)
    if peer is None and group_peer is not None:
        pg: Any = get(args, kwargs, "group") or dist.group.WORLD
        peer = dist.get_global_rank(pg, group_peer)
    return None if peer is None else int(peer)


_me: list[int] = []  # this process's global rank, once known
_details: dict[tuple[Any, ...], str] = {}  # formatted detail strings (they repeat every step)


def _my_rank() -> int:
    if not _me:
        import torch.distributed as dist

        _me.append(dist.get_rank())
    return _me[0]


def _detail(
    g: GroupInfo, is_p2p: bool, src: int | None, dst: int | None, peer: int | None, asyn: bool
) -> str:
    key = (g.gid, is_p2p, src, dst, peer, asyn, id(topology))
    text = _details.get(key)
    if text is None:
        if is_p2p:
            d: dict[str, object] = {
                "group": f"p2p:{'?' if src is None else src}>{dst}",
                "group_size": 2,
                "nnodes": topology.nodes_spanned([r for r in (src, dst) if r is not None]),
                "peer": peer if peer is not None else "?",
                "backend": g.backend,
            }
        else:
            d = g.detail()
        d["async"] = int(asyn)
        d["source"] = "torch"
        text = format_detail(d)
        _details[key] = text
    return text


def _wrap(op: str, orig: Callable[..., Any]) -> Callable[..., Any]:
    get = _getter(orig)
    is_p2p = op in P2P
    always_async = op in ("isend", "irecv")
    payload = _PAYLOAD[op]
    recording = _core.recording
    record_event = _core.record_event  # positional: the cheapest way into the core
    kind = KIND_ID["p2p" if is_p2p else "collective"]
    name_id, enqueue_id = intern(op), intern(f"c10d:{op}")

    @functools.wraps(orig)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if getattr(_tls, "busy", False):
            return orig(*args, **kwargs)
        try:
            g = group_info(get(args, kwargs, "group"))
        except Exception:  # unusual call: let torch report it
            return orig(*args, **kwargs)
        peer = src = dst = None
        if is_p2p:
            me = _my_rank()
            peer = _peer(op, get, args, kwargs)
            src, dst = (me, peer) if op in ("send", "isend") else (peer, me)
        # Sequence numbers count every call, recording or not, so they stay equal across ranks.
        if is_p2p:
            key = (-1 if src is None else src, -1 if dst is None else dst)
            counter = _p2p_seq.get(key) or _p2p_seq.setdefault(key, itertools.count())
        else:
            counter = _seq.get(g.gid) or _seq.setdefault(g.gid, itertools.count())
        seq = next(counter)
        if not recording():  # instrumented, no trace: count the call, nothing else
            _tls.busy = True
            try:
                return orig(*args, **kwargs)
            finally:
                _tls.busy = False
        lane = _core.current_lane()
        _tls.busy = True
        t0 = _core.now_ns()
        try:
            result = orig(*args, **kwargs)
        finally:
            _tls.busy = False
        t1 = _core.now_ns()
        if not recording():
            return result
        nbytes = _nbytes(get(args, kwargs, payload)) if payload else 0
        if op == "recv" and src is None and isinstance(result, int):
            src = result
        asynchronous = always_async or bool(get(args, kwargs, "async_op") or False)
        detail = _detail(g, is_p2p, src, dst, peer, asynchronous)
        if "nccl" in g.backend:  # the plugin records the transfer; this is the host-side enqueue
            record_event(_REGION, _HOST, enqueue_id, t0, t1, seq, nbytes, lane, intern(detail))
        elif asynchronous and result is not None and hasattr(result, "get_future"):
            _on_complete(result, kind, name_id, t0, seq, nbytes, lane, detail)
        else:
            record_event(kind, _COMM, name_id, t0, t1, seq, nbytes, lane, intern(detail))
        return result

    wrapper.__stallscope_original__ = orig  # type: ignore[attr-defined]
    return wrapper


_REGION, _HOST, _COMM = KIND_ID["region"], CATEGORY_ID["host"], CATEGORY_ID["comm"]


def _on_complete(
    work: Any,
    kind: int,
    name_id: int,
    t0: int,
    seq: int,
    nbytes: int,
    lane: int,
    detail: str,
) -> None:
    """Record when the work completes (the backend's completion thread calls back)."""

    def finish(detail_text: str) -> None:
        _core.record_event(
            kind, _COMM, name_id, t0, _core.now_ns(), seq, nbytes, lane, intern(detail_text)
        )

    def done(_fut: Any) -> None:
        with contextlib.suppress(Exception):  # a tracing problem never breaks training
            finish(detail)

    try:
        work.get_future().add_done_callback(done)
    except Exception:  # backend without futures: the call's own return is all we know
        finish(detail + ";timing=issue")


def patch() -> list[str]:
    """Install the wrappers (idempotent). Returns the ops wrapped."""
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    done = []
    with _state_lock:
        for op in OPS:
            orig = getattr(c10d, op, None)
            if orig is None:
                continue
            if op not in _originals:
                base = getattr(orig, "__stallscope_original__", orig)
                _originals[op] = base
                w = _wrap(op, base)
                setattr(c10d, op, w)
                if getattr(dist, op, None) is base:
                    setattr(dist, op, w)
            done.append(op)
    return done


def unpatch() -> None:
    import torch.distributed as dist
    import torch.distributed.distributed_c10d as c10d

    with _state_lock:
        for op, base in _originals.items():
            for mod in (c10d, dist):
                cur = getattr(mod, op, None)
                if getattr(cur, "__stallscope_original__", None) is base:
                    setattr(mod, op, base)
        _originals.clear()


def reset_groups() -> None:
    """Forget cached group info (after destroy_process_group, new groups reuse ids)."""
    _groups.clear()
    _default.clear()
    _details.clear()
    _me.clear()
    with _state_lock:
        _seq.clear()
        _p2p_seq.clear()
