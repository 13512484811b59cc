// The keys the streaming Kineto reader looks for in an event object and in its args, and their
// dispatch: by length and one byte first (most args keys are not ours), then one compare.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "kineto/stream_scanner.h"

namespace stallscope::kineto {

// kArgCheckedInt: validated as an integer, not kept; kArgScalar: any scalar, not kept.
enum ArgKind { kArgRow, kArgSync, kArgNcclInt, kArgNcclStr, kArgCheckedInt, kArgScalar };
struct ArgKey {
  std::string_view key;
  ArgKind kind;
  int field;  // RowInt, NcclInt or NcclStr
};
inline constexpr ArgKey kArgKeys[] = {
    {"External id", kArgRow, kRowExtId},
    {"correlation", kArgRow, kRowCorrelation},
    {"stream", kArgRow, kRowStream},
    {"device", kArgRow, kRowDevice},
    {"bytes", kArgRow, kRowBytes},
    {"cuda_sync_kind", kArgSync, 0},
    {"Collective name", kArgNcclStr, kNcclColl},
    {"In msg nelems", kArgNcclInt, kNcclInNelems},
    {"Out msg nelems", kArgCheckedInt, 0},
    {"Group size", kArgNcclInt, kNcclGroupSize},
    {"dtype", kArgNcclStr, kNcclDtype},
    {"Process Group Name", kArgNcclStr, kNcclPg},
    {"Process Group Description", kArgNcclStr, kNcclPgDesc},
    {"Process Group Ranks", kArgNcclStr, kNcclPgRanks},
    {"Global rank start", kArgScalar, 0},
    {"Global rank stride", kArgScalar, 0},
};

// k == lit, with the literal's length known at compile time (the compare inlines; a
// string_view == calls memcmp for every key of every event).
template <size_t N>
inline bool same(std::string_view k, const char (&lit)[N]) {
  return k.size() == N - 1 && std::memcmp(k.data(), lit, N - 1) == 0;
}

// The kArgKeys entry of `k`, or -1: by length first (most keys are not ours), then one
// compare of that length (the table's key has k's length in each case below).
inline int arg_index(std::string_view k) {
  auto is = [&](int j) {
    return std::memcmp(kArgKeys[j].key.data(), k.data(), k.size()) == 0 ? j : -1;
  };
  switch (k.size()) {
    case 5:
      return k[0] == 'b' ? is(4) : is(10);  // bytes, dtype
    case 6:
      return k[0] == 's' ? is(2) : is(3);  // stream, device
    case 10:
      return is(9);  // Group size
    case 11:
      return k[0] == 'E' ? is(0) : is(1);  // External id, correlation
    case 13:
      return is(7);  // In msg nelems
    case 14:
      return k[0] == 'c' ? is(5) : is(8);  // cuda_sync_kind, Out msg nelems
    case 15:
      return is(6);  // Collective name
    case 17:
      return is(14);  // Global rank start
    case 18:
      return k[0] == 'P' ? is(11) : is(15);  // Process Group Name, Global rank stride
    case 19:
      return is(13);  // Process Group Ranks
    case 25:
      return is(12);  // Process Group Description
    default:
      return -1;
  }
}

enum EvKey {
  kEvPh,
  kEvCat,
  kEvName,
  kEvPid,
  kEvTid,
  kEvTs,
  kEvDur,
  kEvId,
  kEvBp,
  kEvArgs,
  kEvOther
};

inline EvKey event_key(std::string_view k) {
  switch (k.size()) {
    case 2:
      if (same(k, "ph")) return kEvPh;
      if (same(k, "ts")) return kEvTs;
      if (same(k, "id")) return kEvId;
      if (same(k, "bp")) return kEvBp;
      break;
    case 3:
      if (same(k, "cat")) return kEvCat;
      if (same(k, "pid")) return kEvPid;
      if (same(k, "tid")) return kEvTid;
      if (same(k, "dur")) return kEvDur;
      break;
    case 4:
      if (same(k, "name")) return kEvName;
      if (same(k, "args")) return kEvArgs;
      break;
    default:
      break;
  }
  return kEvOther;
}

// The 8 bytes at `s` (N - 1 <= 8 of them given) as load8() would read them, for masked compares.
template <size_t N>
constexpr uint64_t packed(const char (&s)[N]) {
  uint64_t w = 0;
  for (size_t i = 0; i + 1 < N; ++i) w |= uint64_t{static_cast<unsigned char>(s[i])} << (8 * i);
  return w;
}

// The event key at the start of `w` (8 bytes from its opening quote) when Kineto's usual
// spelling follows: the plain key, its closing quote and the colon right after. *len: the bytes
// that takes. -1 for anything else (the caller then reads the key as a JSON string).
inline int quick_event_key(uint64_t w, size_t* len) {
  auto is = [&](const auto& lit) {
    constexpr size_t n = sizeof(lit) - 1;
    if ((w & (~uint64_t{0} >> (64 - 8 * n))) != packed(lit)) return false;
    *len = n;
    return true;
  };
  switch ((w >> 8) & 0xFF) {  // the key's first letter
    case 'p':
      if (is("\"ph\":")) return kEvPh;
      if (is("\"pid\":")) return kEvPid;
      break;
    case 't':
      if (is("\"ts\":")) return kEvTs;
      if (is("\"tid\":")) return kEvTid;
      break;
    case 'c':
      if (is("\"cat\":")) return kEvCat;
      break;
    case 'n':
      if (is("\"name\":")) return kEvName;
      break;
    case 'd':
      if (is("\"dur\":")) return kEvDur;
      break;
    case 'a':
      if (is("\"args\":")) return kEvArgs;
      break;
    case 'i':
      if (is("\"id\":")) return kEvId;
      break;
    case 'b':
      if (is("\"bp\":")) return kEvBp;
      break;
    default:
      break;
  }
  return -1;
}

}  // namespace stallscope::kineto
