"""ctypes mirror of the NCCL profiler plugin ABI (v4..v7) as NCCL passes it, for driving the plugin
the way NCCL does: dlopen, look up ncclProfiler_vN, call its table."""

from __future__ import annotations

import ctypes as C  # noqa: N812 - the usual alias for ABI mirrors

GROUP, COLL, P2P, PROXY_OP, PROXY_STEP, PROXY_CTRL, KERNEL_CH = [1 << i for i in range(7)]
KERNEL_CH_STOP = 22  # ncclProfilerKernelChStop
PROXY_OP_IN_PROGRESS = 19


class ProxyOp(C.Structure):
    _fields_ = (
        ("pid", C.c_int),
        ("channelId", C.c_uint8),
        ("peer", C.c_int),
        ("nSteps", C.c_int),
        ("chunkSize", C.c_int),
        ("isSend", C.c_int),
    )


class KernelCh(C.Structure):
    _fields_ = (("channelId", C.c_uint8), ("pTimer", C.c_uint64))


_COLL_V4 = (
    ("seqNumber", C.c_uint64),
    ("func", C.c_char_p),
    ("sendBuff", C.c_void_p),
    ("recvBuff", C.c_void_p),
    ("count", C.c_size_t),
    ("root", C.c_int),
    ("datatype", C.c_char_p),
    ("nChannels", C.c_uint8),
    ("nWarps", C.c_uint8),
    ("algo", C.c_char_p),
    ("proto", C.c_char_p),
)
_P2P_V4 = (
    ("func", C.c_char_p),
    ("buff", C.c_void_p),
    ("datatype", C.c_char_p),
    ("count", C.c_size_t),
    ("peer", C.c_int),
    ("nChannels", C.c_uint8),
)


class CollV4(C.Structure):
    _fields_ = _COLL_V4


class P2pV4(C.Structure):
    _fields_ = _P2P_V4


class CollV5(C.Structure):
    _fields_ = (*_COLL_V4, ("parentGroup", C.c_void_p))


class P2pV5(C.Structure):
    _fields_ = (*_P2P_V4, ("parentGroup", C.c_void_p))


class CollV7(C.Structure):
    _fields_ = (
        *_COLL_V4,
        ("parentGroup", C.c_void_p),
        ("kernelVariant", C.c_char_p),
        ("isSymColl", C.c_bool),
        ("userTag", C.c_uint64),
    )


class P2pV7(C.Structure):
    _fields_ = (*_P2P_V4, ("parentGroup", C.c_void_p), ("userTag", C.c_uint64))


class CeCollV6(C.Structure):  # only for the union's size: NCCL's v6 union is this large
    _fields_ = (
        *_COLL_V4[:7],
        ("syncStrategy", C.c_char_p),
        ("intraBatchSync", C.c_bool),
        ("batchSize", C.c_uint32),
        ("numBatches", C.c_uint32),
        ("ceSeqNum", C.c_uint32),
        ("stream", C.c_void_p),
        ("userTag", C.c_uint64),
    )


def _union(coll: type, p2p: type) -> type:
    return type(
        "U",
        (C.Union,),
        {
            "_fields_": (
                ("coll", coll),
                ("p2p", p2p),
                ("proxyOp", ProxyOp),
                ("kernelCh", KernelCh),
                ("ceColl", CeCollV6),
            )
        },
    )


class DescrV4(C.Structure):
    _anonymous_ = ("u",)
    _fields_ = (
        ("type", C.c_uint8),
        ("parentObj", C.c_void_p),
        ("rank", C.c_int),
        ("u", _union(CollV4, P2pV4)),
    )


class DescrV5(C.Structure):
    _anonymous_ = ("u",)
    _fields_ = (
        ("type", C.c_uint64),
        ("parentObj", C.c_void_p),
        ("rank", C.c_int),
        ("u", _union(CollV5, P2pV5)),
    )


DescrV6 = DescrV5  # v6 only adds union members the plugin does not read


class DescrV7(C.Structure):
    _anonymous_ = ("u",)
    _fields_ = (
        ("type", C.c_uint64),
        ("parentObj", C.c_void_p),
        ("rank", C.c_int),
        ("u", _union(CollV7, P2pV7)),
    )


class StateArgs(C.Union):
    _fields_ = (("transSize", C.c_size_t), ("pTimer", C.c_uint64))


LOGGER = C.CFUNCTYPE(None, C.c_int, C.c_ulong, C.c_char_p, C.c_int, C.c_char_p)
_P = C.POINTER
INIT_V4 = C.CFUNCTYPE(
    C.c_int,
    _P(C.c_void_p),
    _P(C.c_int),
    C.c_char_p,
    C.c_uint64,
    C.c_int,
    C.c_int,
    C.c_int,
    LOGGER,
)
INIT_V5 = C.CFUNCTYPE(
    C.c_int,
    _P(C.c_void_p),
    C.c_uint64,
    _P(C.c_int),
    C.c_char_p,
    C.c_int,
    C.c_int,
    C.c_int,
    LOGGER,
)
STOP = C.CFUNCTYPE(C.c_int, C.c_void_p)
RECORD = C.CFUNCTYPE(C.c_int, C.c_void_p, C.c_int, _P(StateArgs))
FINALIZE = C.CFUNCTYPE(C.c_int, C.c_void_p)


def _table(init: type, descr: type) -> type:
    return type(
        "Table",
        (C.Structure,),
        {
            "_fields_": (
                ("name", C.c_char_p),
                ("init", init),
                ("startEvent", C.CFUNCTYPE(C.c_int, C.c_void_p, _P(C.c_void_p), _P(descr))),
                ("stopEvent", STOP),
                ("recordEventState", RECORD),
                ("finalize", FINALIZE),
            )
        },
    )


VERSIONS = {
    4: (_table(INIT_V4, DescrV4), DescrV4),
    5: (_table(INIT_V5, DescrV5), DescrV5),
    6: (_table(INIT_V5, DescrV6), DescrV6),
    7: (_table(INIT_V5, DescrV7), DescrV7),
}

_no_log = LOGGER(lambda *a: None)


class Plugin:
    """One ncclProfiler_vN table of a loaded plugin, called as NCCL calls it."""

    def __init__(self, lib: C.CDLL, version: int) -> None:
        table_t, self.descr_t = VERSIONS[version]
        self.version = version
        self.t = table_t.in_dll(lib, f"ncclProfiler_v{version}")

    def init(
        self, name: str, comm_hash: int, nnodes: int, nranks: int, rank: int
    ) -> tuple[int, int, int]:
        """(rc, context, activation mask)"""
        ctx, mask = C.c_void_p(), C.c_int(-1)
        if self.version == 4:
            rc = self.t.init(
                C.byref(ctx), C.byref(mask), name.encode(), comm_hash, nnodes, nranks, rank, _no_log
            )
        else:
            rc = self.t.init(
                C.byref(ctx), comm_hash, C.byref(mask), name.encode(), nnodes, nranks, rank, _no_log
            )
        return rc, ctx.value or 0, mask.value

    def start(self, ctx: int, d: C.Structure) -> int:
        h = C.c_void_p()
        rc = self.t.startEvent(ctx, C.byref(h), C.byref(d))
        assert rc == 0
        return h.value or 0

    def stop(self, h: int) -> None:
        assert self.t.stopEvent(h) == 0

    def state(self, h: int, state: int, ptimer: int = 0) -> None:
        args = StateArgs(pTimer=ptimer)
        assert self.t.recordEventState(h, state, C.byref(args)) == 0

    def finalize(self, ctx: int) -> None:
        assert self.t.finalize(ctx) == 0

    # descriptors
    def group(self, rank: int) -> C.Structure:
        return self.descr_t(type=GROUP, rank=rank)

    def coll(
        self,
        rank: int,
        parent: int,
        seq: int,
        func: bytes,
        count: int,
        dtype: bytes,
        algo: bytes = b"RING",
        proto: bytes = b"LL",
        nchannels: int = 2,
    ) -> C.Structure:
        d = self.descr_t(type=COLL, parentObj=parent, rank=rank)
        d.coll.seqNumber, d.coll.func, d.coll.count, d.coll.datatype = seq, func, count, dtype
        d.coll.root, d.coll.nChannels, d.coll.nWarps = 0, nchannels, 16
        d.coll.algo, d.coll.proto = algo, proto
        if self.version == 7:
            d.coll.kernelVariant = b"Generic"
        return d

    def p2p(
        self, rank: int, parent: int, func: bytes, peer: int, count: int, dtype: bytes
    ) -> C.Structure:
        d = self.descr_t(type=P2P, parentObj=parent, rank=rank)
        d.p2p.func, d.p2p.peer, d.p2p.count, d.p2p.datatype, d.p2p.nChannels = (
            func,
            peer,
            count,
            dtype,
            1,
        )
        return d

    def proxy_op(self, rank: int, parent: int, channel: int, peer: int) -> C.Structure:
        d = self.descr_t(type=PROXY_OP, parentObj=parent, rank=rank)
        d.proxyOp.channelId, d.proxyOp.peer, d.proxyOp.nSteps, d.proxyOp.chunkSize = (
            channel,
            peer,
            8,
            1 << 17,
        )
        d.proxyOp.isSend = 1
        return d

    def kernel_ch(self, rank: int, parent: int, channel: int, ptimer: int) -> C.Structure:
        d = self.descr_t(type=KERNEL_CH, parentObj=parent, rank=rank)
        d.kernelCh.channelId, d.kernelCh.pTimer = channel, ptimer
        return d
