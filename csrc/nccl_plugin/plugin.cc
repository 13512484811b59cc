// libnccl-profiler-stallscope.so: an NCCL profiler plugin (ABI v4 .. v7) that writes NCCL's
// groups, collectives and point-to-point operations into the stallscope core of the process.
//
// What is recorded, per communicator:
// - Coll  -> kind collective, category comm, name = NCCL's func (AllReduce ...), correlation =
//   seqNumber, bytes = count * sizeof(datatype), detail: group (commHash), group_size (nranks),
//   nnodes, comm, comm_rank, algo, proto, nchannels, nwarps, dtype, count, root, timing.
// - P2p   -> kind p2p, name Send / Recv, group = "<commHash>:<src>><dst>", correlation = the n-th
//   operation between that sender and receiver (equal on both sides).
// - Group -> kind marker, category other (the host-side ncclGroupStart/End span).
// The transfer's end is the last ProxyOp / KernelCh stop of the operation (a Coll stop only means
// "enqueued"); KernelCh carries GPU globaltimer stamps, mapped onto the process clock with the
// smallest (host now - GPU stamp) seen, i.e. the tightest upper bound of the offset.
//
// Safety: without a loaded stallscope core (STALLSCOPE_CORE_LIBRARY) init enables no events; every
// other entry point only returns success and never throws; memory is per communicator and freed at
// finalize. Operations still open when their slot is reused (more than kSlots in flight) or when
// stallscope_nccl_flush() runs are emitted with what is known (timing=partial / host).
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include "core/core_api.h"
#include "nccl_plugin/nccl_profiler_abi.h"

#define SS_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr uint8_t kKindMarker = 10;      // stallscope::Kind::kMarker
constexpr uint8_t kKindCollective = 11;  // stallscope::Kind::kCollective
constexpr uint8_t kKindP2p = 12;         // stallscope::Kind::kP2p
constexpr uint8_t kCatComm = 3;          // stallscope::Category::kComm
constexpr uint8_t kCatOther = 8;         // stallscope::Category::kOther

constexpr int kSlots = 4096;        // operations (groups, colls, p2ps) in flight per communicator
constexpr int kChildSlots = 16384;  // proxy ops / kernel channels in flight per communicator
constexpr int kDefaultMask = ssNcclProfileGroup | ssNcclProfileColl | ssNcclProfileP2p |
                             ssNcclProfileProxyOp | ssNcclProfileKernelCh;

// --- the core ----------------------------------------------------------------------------------
std::atomic<const stallscope_core_api_t*> g_api{nullptr};
std::atomic<int64_t> g_gpu_offset{INT64_MAX};  // host ns - GPU globaltimer ns; INT64_MAX = unknown
std::atomic<int64_t> g_dropped{0};             // events NCCL reported that could not be recorded
std::atomic<int64_t> g_recorded{0};            // events written into the core
std::atomic<int> g_live_contexts{0};

const stallscope_core_api_t* attach_core() {
  if (const auto* api = g_api.load(std::memory_order_acquire)) return api;
  void* lib = nullptr;
  if (const char* path = std::getenv(STALLSCOPE_CORE_LIBRARY_ENV); path != nullptr && *path) {
    lib = dlopen(path, RTLD_NOLOAD | RTLD_LAZY);  // only the copy Python already loaded
  }
  void* sym = lib ? dlsym(lib, STALLSCOPE_CORE_API_SYMBOL) : nullptr;
  if (sym == nullptr) return nullptr;
  const auto* api = reinterpret_cast<stallscope_core_api_fn>(sym)();
  if (api == nullptr || api->version < 1 || api->size < sizeof(stallscope_core_api_t)) {
    return nullptr;
  }
  g_api.store(api, std::memory_order_release);
  return api;
}

int64_t host_now() {
  const auto* api = g_api.load(std::memory_order_acquire);
  return api ? api->now_ns() : 0;
}

// Learns the GPU-to-host offset from a callback that runs after the GPU stamp was taken.
void observe_gpu(uint64_t gpu_ns, int64_t host_ns) {
  if (gpu_ns == 0 || host_ns == 0) return;
  int64_t off = host_ns - static_cast<int64_t>(gpu_ns);
  int64_t cur = g_gpu_offset.load(std::memory_order_relaxed);
  while (off < cur && !g_gpu_offset.compare_exchange_weak(cur, off, std::memory_order_relaxed)) {
  }
}

int64_t gpu_to_host(uint64_t gpu_ns) {
  int64_t off = g_gpu_offset.load(std::memory_order_relaxed);
  if (gpu_ns == 0 || off == INT64_MAX) return 0;
  return static_cast<int64_t>(gpu_ns) + off;
}

// Interned ids of NCCL's strings (static in NCCL, so keyed by pointer) and of detail strings.
class Interner {
 public:
  uint32_t id(const char* s) {
    if (s == nullptr) return 0;
    std::lock_guard<std::mutex> g(mu_);
    auto it = by_ptr_.find(s);
    if (it != by_ptr_.end()) return it->second;
    uint32_t v = text(s, std::strlen(s));
    by_ptr_.emplace(s, v);
    return v;
  }
  uint32_t text(const char* s, size_t n) {
    const auto* api = g_api.load(std::memory_order_acquire);
    return api ? api->intern(s, n) : 0;
  }

 private:
  std::mutex mu_;
  std::unordered_map<const char*, uint32_t> by_ptr_;
};
Interner g_interner;

size_t dtype_size(const char* t) {
  if (t == nullptr) return 0;
  static const struct {
    const char* name;
    size_t size;
  } kSizes[] = {
      {"ncclInt8", 1},    {"ncclUint8", 1},    {"ncclInt32", 4},      {"ncclUint32", 4},
      {"ncclInt64", 8},   {"ncclUint64", 8},   {"ncclFloat16", 2},    {"ncclFloat32", 4},
      {"ncclFloat64", 8}, {"ncclBfloat16", 2}, {"ncclFloat8e4m3", 1}, {"ncclFloat8e5m2", 1},
      {"int8", 1},        {"uint8", 1},        {"int32", 4},          {"uint32", 4},
      {"int64", 8},       {"uint64", 8},       {"half", 2},           {"float16", 2},
      {"float", 4},       {"float32", 4},      {"double", 8},         {"float64", 8},
      {"bfloat16", 2},    {"fp8_e4m3", 1},     {"fp8_e5m2", 1},
  };
  for (const auto& e : kSizes) {
    if (std::strcmp(t, e.name) == 0) return e.size;
  }
  return 0;
}

// --- per-communicator state ------------------------------------------------------------------
struct Context;

// One Group, Coll or P2p operation.
struct Op {
  Context* ctx = nullptr;
  uint8_t type = 0;  // ssNcclProfile* bit
  std::atomic<bool> open{false};
  std::atomic<bool> stopped{false};
  std::atomic<bool> emitted{true};
  std::atomic<int32_t> pending{0};   // children started, not yet stopped
  std::atomic<int32_t> children{0};  // children ever started
  std::atomic<int32_t> gpu_children{0};
  std::atomic<int64_t> first_ns{INT64_MAX};  // earliest child start (arrival on the device)
  std::atomic<int64_t> last_ns{0};           // latest child end (end of the transfer)
  int64_t enqueue_ns = 0;                    // host time of startEvent
  int64_t stop_ns = 0;                       // host time of stopEvent
  int32_t lane = 0;
  // descriptor copy (strings are NCCL's static strings, kept as pointers)
  const char* func = nullptr;
  const char* dtype = nullptr;
  const char* algo = nullptr;
  const char* proto = nullptr;
  const char* variant = nullptr;
  uint64_t seq = 0;
  uint64_t count = 0;
  int root = -1;
  int peer = -1;
  int rank = -1;
  int nchannels = 0;
  int nwarps = 0;
  int64_t p2p_seq = 0;
};

// One ProxyOp or KernelCh.
struct Child {
  Op* parent = nullptr;
  uint8_t type = 0;
  int64_t start_ns = 0;   // host clock
  uint64_t gpu_stop = 0;  // KernelCh: globaltimer at the channel's end (recordEventState)
};

struct Context {
  uint64_t comm_hash = 0;
  std::string comm_name;
  int nnodes = 1, nranks = 1, rank = 0;
  int device = -1;
  std::string detail_base;  // "group=...;group_size=...;nnodes=...;comm=...;comm_rank=..."
  std::atomic<uint64_t> next_op{0}, next_child{0};
  Op ops[kSlots];
  Child kids[kChildSlots];
  std::mutex p2p_mu;
  std::unordered_map<uint64_t, int64_t> p2p_counts;  // (src << 32 | dst) + func -> count
};

std::string sanitize(const char* s) {
  std::string out = s ? s : "";
  for (char& c : out) {
    if (c == ';' || c == '=' || c == '\n') c = '_';
  }
  return out;
}

void emit(Op* op, const char* why) {
  if (op->emitted.exchange(true)) return;
  Context* c = op->ctx;
  const auto* api = g_api.load(std::memory_order_acquire);
  if (api == nullptr) return;
  int64_t first = op->first_ns.load(), last = op->last_ns.load();
  bool have_child_end = op->children.load() > 0 && last > 0;
  stallscope_event e{};
  e.start_ns = (first != INT64_MAX && first > 0) ? first : op->enqueue_ns;
  e.end_ns = have_child_end ? last : (op->stop_ns ? op->stop_ns : e.start_ns);
  if (e.end_ns < e.start_ns) e.end_ns = e.start_ns;
  e.lane = op->lane;
  e.device = static_cast<int16_t>(c->device);
  e.name_id = g_interner.id(op->func);
  const char* timing = have_child_end ? (op->gpu_children.load() ? "gpu" : "proxy") : why;
  std::string detail = c->detail_base;
  char buf[160];
  if (op->type == ssNcclProfileGroup) {
    e.kind = kKindMarker;
    e.category = kCatOther;
    e.name_id = g_interner.id("ncclGroup");
    e.end_ns = op->stop_ns ? op->stop_ns : e.start_ns;
    e.start_ns = op->enqueue_ns;
  } else if (op->type == ssNcclProfileColl) {
    e.kind = kKindCollective;
    e.category = kCatComm;
    e.correlation = static_cast<int64_t>(op->seq);
    e.bytes = static_cast<int64_t>(op->count * dtype_size(op->dtype));
    std::snprintf(buf, sizeof buf, ";nchannels=%d;nwarps=%d;count=%llu;root=%d", op->nchannels,
                  op->nwarps, static_cast<unsigned long long>(op->count), op->root);
    detail += ";algo=" + sanitize(op->algo) + ";proto=" + sanitize(op->proto) +
              ";dtype=" + sanitize(op->dtype) + buf;
    if (op->variant) detail += ";kernel_variant=" + sanitize(op->variant);
  } else {  // P2p: the group names the direction so both sides build the same key
    e.kind = kKindP2p;
    e.category = kCatComm;
    e.correlation = op->p2p_seq;
    e.bytes = static_cast<int64_t>(op->count * dtype_size(op->dtype));
    bool send = op->func && std::strstr(op->func, "Send") != nullptr;
    int src = send ? op->rank : op->peer, dst = send ? op->peer : op->rank;
    // NCCL does not say whether the peer shares this node: a pair in a multi-node communicator
    // counts as crossing nodes (an upper bound, flagged by nnodes_bound=1).
    std::snprintf(buf, sizeof buf,
                  "group=%llx:%d>%d;group_size=2;nnodes=%d;nnodes_bound=%d;peer=%d",
                  static_cast<unsigned long long>(c->comm_hash), src, dst, c->nnodes > 1 ? 2 : 1,
                  c->nnodes > 1 ? 1 : 0, op->peer);
    detail = std::string(buf) + ";comm=" + sanitize(c->comm_name.c_str()) +
             ";comm_rank=" + std::to_string(c->rank) + ";dtype=" + sanitize(op->dtype) +
             ";count=" + std::to_string(op->count) + ";nchannels=" + std::to_string(op->nchannels);
  }
  detail += std::string(";timing=") + timing + ";source=nccl_plugin";
  e.detail_id = g_interner.text(detail.data(), detail.size());
  if (api->record(&e)) {
    g_recorded.fetch_add(1, std::memory_order_relaxed);
  } else if (api->recording()) {
    g_dropped.fetch_add(1, std::memory_order_relaxed);
  }
}

// Emits an operation once NCCL stopped it and every child it started has stopped.
void maybe_emit(Op* op) {
  if (op->stopped.load() && op->pending.load() == 0 &&
      (op->children.load() > 0 || op->type == ssNcclProfileGroup)) {
    emit(op, "host");
  }
}

void flush_context(Context* c, const char* why) {
  for (Op& op : c->ops) {
    if (!op.emitted.load() && op.stopped.load()) emit(&op, why);
  }
}

std::mutex g_contexts_mu;
Context* g_contexts[256];  // live contexts, for stallscope_nccl_flush(); extra ones are not listed

// --- the plugin entry points, shared by every ABI version ------------------------------------
int init_common(void** context, int* mask, const char* comm_name, uint64_t comm_hash, int nnodes,
                int nranks, int rank) {
  if (context == nullptr || mask == nullptr) return ssNcclInvalidArgument;
  *context = nullptr;
  *mask = 0;
  if (attach_core() == nullptr) return ssNcclSuccess;  // no stallscope here: stay silent
  int want = kDefaultMask;
  if (const char* m = std::getenv("STALLSCOPE_NCCL_EVENTS"); m != nullptr && *m) {
    want = static_cast<int>(std::strtol(m, nullptr, 0)) & kDefaultMask;
  }
  Context* c = new (std::nothrow) Context();
  if (c == nullptr) return ssNcclSystemError;
  c->comm_hash = comm_hash;
  c->comm_name = comm_name ? comm_name : "";
  c->nnodes = nnodes;
  c->nranks = nranks;
  c->rank = rank;
  using get_device_fn = int (*)(int*);
  if (auto* f = reinterpret_cast<get_device_fn>(dlsym(RTLD_DEFAULT, "cudaGetDevice"))) {
    int d = -1;
    if (f(&d) == 0) c->device = d;
  }
  char buf[128];
  std::snprintf(buf, sizeof buf, "group=%llx;group_size=%d;nnodes=%d;comm_rank=%d",
                static_cast<unsigned long long>(comm_hash), nranks, nnodes, rank);
  c->detail_base = std::string(buf) + ";comm=" + sanitize(comm_name);
  {
    std::lock_guard<std::mutex> g(g_contexts_mu);
    for (auto& slot : g_contexts) {
      if (slot == nullptr) {
        slot = c;
        break;
      }
    }
  }
  g_live_contexts.fetch_add(1);
  *context = c;
  *mask = want;
  return ssNcclSuccess;
}

// Fields the plugin reads, whatever the version.
struct View {
  uint64_t type;
  void* parent;
  int rank;
  const char *func, *dtype, *algo, *proto, *variant;
  uint64_t seq, count;
  int root, peer, nchannels, nwarps;
  uint64_t ptimer;
};

template <class D>
View view_common(const D* d) {
  View v{};
  v.type = d->type;
  v.parent = d->parentObj;
  v.rank = d->rank;
  if (v.type == ssNcclProfileColl) {
    v.seq = d->coll.seqNumber;
    v.func = d->coll.func;
    v.count = d->coll.count;
    v.root = d->coll.root;
    v.dtype = d->coll.datatype;
    v.nchannels = d->coll.nChannels;
    v.nwarps = d->coll.nWarps;
    v.algo = d->coll.algo;
    v.proto = d->coll.proto;
  } else if (v.type == ssNcclProfileP2p) {
    v.func = d->p2p.func;
    v.dtype = d->p2p.datatype;
    v.count = d->p2p.count;
    v.peer = d->p2p.peer;
    v.nchannels = d->p2p.nChannels;
  } else if (v.type == ssNcclProfileKernelCh) {
    v.ptimer = d->kernelCh.pTimer;
  } else if (v.type == ssNcclProfileProxyOp) {
    v.peer = d->proxyOp.peer;
  }
  return v;
}

View view(const ss_nccl_descr_v4_t* d) { return view_common(d); }
View view(const ss_nccl_descr_v5_t* d) { return view_common(d); }
View view(const ss_nccl_descr_v6_t* d) { return view_common(d); }
View view(const ss_nccl_descr_v7_t* d) {
  View v = view_common(d);
  if (v.type == ssNcclProfileColl) v.variant = d->coll.kernelVariant;
  return v;
}

// Handles: an Op* or a Child*; the low bit marks a child (both are at least 8-aligned).
void* child_handle(Child* k) { return reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(k) | 1); }
bool is_child(void* h) { return (reinterpret_cast<uintptr_t>(h) & 1) != 0; }
Child* as_child(void* h) {
  return reinterpret_cast<Child*>(reinterpret_cast<uintptr_t>(h) & ~1ULL);
}

int start_common(void* context, void** handle, const View& v) {
  if (handle == nullptr) return ssNcclSuccess;
  *handle = nullptr;
  auto* c = static_cast<Context*>(context);
  const auto* api = g_api.load(std::memory_order_acquire);
  if (c == nullptr || api == nullptr) return ssNcclSuccess;
  int64_t now = api->now_ns();
  if (v.type == ssNcclProfileGroup || v.type == ssNcclProfileColl || v.type == ssNcclProfileP2p) {
    if (!api->recording()) return ssNcclSuccess;  // not tracing now: no handle, no children
    Op* op = &c->ops[c->next_op.fetch_add(1, std::memory_order_relaxed) % kSlots];
    if (!op->emitted.load() && op->stopped.load()) emit(op, "partial");  // slot reused
    if (!op->emitted.load()) g_dropped.fetch_add(1, std::memory_order_relaxed);
    op->emitted.store(true);
    op->ctx = c;
    op->type = static_cast<uint8_t>(v.type);
    op->stopped.store(false);
    op->pending.store(0);
    op->children.store(0);
    op->gpu_children.store(0);
    op->first_ns.store(INT64_MAX);
    op->last_ns.store(0);
    op->enqueue_ns = now;
    op->stop_ns = 0;
    op->lane = api->current_lane();
    op->func = v.func;
    op->dtype = v.dtype;
    op->algo = v.algo;
    op->proto = v.proto;
    op->variant = v.variant;
    op->seq = v.seq;
    op->count = v.count;
    op->root = v.root;
    op->peer = v.peer;
    op->rank = v.rank;
    op->nchannels = v.nchannels;
    op->nwarps = v.nwarps;
    op->p2p_seq = 0;
    if (v.type == ssNcclProfileP2p) {
      bool send = v.func && std::strstr(v.func, "Send") != nullptr;
      uint64_t src = static_cast<uint32_t>(send ? v.rank : v.peer);
      uint64_t dst = static_cast<uint32_t>(send ? v.peer : v.rank);
      uint64_t key = (src << 32) | dst;
      std::lock_guard<std::mutex> g(c->p2p_mu);
      op->p2p_seq = c->p2p_counts[key]++;
    }
    op->emitted.store(false);
    *handle = op;
    return ssNcclSuccess;
  }
  if (v.type == ssNcclProfileProxyOp || v.type == ssNcclProfileKernelCh) {
    auto* parent = static_cast<Op*>(v.parent);
    if (parent == nullptr || is_child(parent) || parent->ctx != c || parent->emitted.load()) {
      return ssNcclSuccess;  // parent not traced (or already written): nothing to attach to
    }
    Child* k = &c->kids[c->next_child.fetch_add(1, std::memory_order_relaxed) % kChildSlots];
    k->parent = parent;
    k->type = static_cast<uint8_t>(v.type);
    k->gpu_stop = 0;
    k->start_ns = now;
    if (v.type == ssNcclProfileKernelCh) {
      observe_gpu(v.ptimer, now);
      int64_t t = gpu_to_host(v.ptimer);
      if (t) k->start_ns = t;
      parent->gpu_children.fetch_add(1);
    }
    parent->pending.fetch_add(1);
    parent->children.fetch_add(1);
    int64_t cur = parent->first_ns.load();
    while (k->start_ns < cur && !parent->first_ns.compare_exchange_weak(cur, k->start_ns)) {
    }
    *handle = child_handle(k);
  }
  return ssNcclSuccess;
}

int stop_common(void* handle) {
  if (handle == nullptr) return ssNcclSuccess;
  int64_t now = host_now();
  if (is_child(handle)) {
    Child* k = as_child(handle);
    Op* parent = k->parent;
    if (parent == nullptr) return ssNcclSuccess;
    int64_t end = now;
    if (k->type == ssNcclProfileKernelCh && k->gpu_stop) {
      int64_t t = gpu_to_host(k->gpu_stop);
      if (t) end = t;
    }
    int64_t cur = parent->last_ns.load();
    while (end > cur && !parent->last_ns.compare_exchange_weak(cur, end)) {
    }
    k->parent = nullptr;
    parent->pending.fetch_sub(1);
    maybe_emit(parent);
    return ssNcclSuccess;
  }
  Op* op = static_cast<Op*>(handle);
  op->stop_ns = now;
  op->stopped.store(true);
  maybe_emit(op);
  return ssNcclSuccess;
}

int record_state_common(void* handle, ss_nccl_state_t state, ss_nccl_state_args_t* args) {
  if (handle == nullptr || !is_child(handle)) return ssNcclSuccess;
  Child* k = as_child(handle);
  if (state == ssNcclKernelChStop && args != nullptr && k->type == ssNcclProfileKernelCh) {
    k->gpu_stop = args->kernelCh.pTimer;
    observe_gpu(k->gpu_stop, host_now());
  }
  return ssNcclSuccess;
}

int finalize_common(void* context) {
  auto* c = static_cast<Context*>(context);
  if (c == nullptr) return ssNcclSuccess;
  {
    std::lock_guard<std::mutex> g(g_contexts_mu);
    for (auto& slot : g_contexts) {
      if (slot == c) slot = nullptr;
    }
    flush_context(c, "partial");  // under the lock: a concurrent flush never sees it freed
  }
  g_live_contexts.fetch_sub(1);
  delete c;
  return ssNcclSuccess;
}

// --- version adapters --------------------------------------------------------------------------
int init_v4(void** ctx, int* mask, const char* name, uint64_t hash, int nnodes, int nranks,
            int rank, ss_nccl_logger_t) {
  return init_common(ctx, mask, name, hash, nnodes, nranks, rank);
}
int init_v5(void** ctx, uint64_t comm_id, int* mask, const char* name, int nnodes, int nranks,
            int rank, ss_nccl_logger_t) {
  return init_common(ctx, mask, name, comm_id, nnodes, nranks, rank);
}
template <class D>
int start_v(void* ctx, void** handle, D* d) {
  if (d == nullptr) {
    if (handle) *handle = nullptr;
    return ssNcclSuccess;
  }
  return start_common(ctx, handle, view(d));
}

}  // namespace

SS_EXPORT ss_nccl_profiler_v4_t ncclProfiler_v4 = {
    "stallscope",        init_v4,        start_v<ss_nccl_descr_v4_t>, stop_common,
    record_state_common, finalize_common};
SS_EXPORT ss_nccl_profiler_v5_t ncclProfiler_v5 = {
    "stallscope",        init_v5,        start_v<ss_nccl_descr_v5_t>, stop_common,
    record_state_common, finalize_common};
SS_EXPORT ss_nccl_profiler_v6_t ncclProfiler_v6 = {
    "stallscope",        init_v5,        start_v<ss_nccl_descr_v6_t>, stop_common,
    record_state_common, finalize_common};
SS_EXPORT ss_nccl_profiler_v7_t ncclProfiler_v7 = {
    "stallscope",        init_v5,        start_v<ss_nccl_descr_v7_t>, stop_common,
    record_state_common, finalize_common};

// Emits every stopped operation still waiting for its transfer's end (call before a trace stops:
// operations with no proxy or kernel-channel events, e.g. one-rank communicators, end there).
// Returns the number of live communicators.
SS_EXPORT int stallscope_nccl_flush(void) {
  std::lock_guard<std::mutex> g(g_contexts_mu);
  int n = 0;
  for (Context* c : g_contexts) {
    if (c != nullptr) {
      flush_context(c, "host");
      ++n;
    }
  }
  return n;
}

// Counters: [0] events recorded, [1] events lost (pool wrap or core refused while recording),
// [2] live communicators.
SS_EXPORT void stallscope_nccl_stats(int64_t* out3) {
  if (out3 == nullptr) return;
  out3[0] = g_recorded.load();
  out3[1] = g_dropped.load();
  out3[2] = g_live_contexts.load();
}
