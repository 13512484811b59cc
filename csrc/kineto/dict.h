// Dict: string -> dense code, for the streaming Kineto reader's string columns (cat, name, args).
//
// Almost every lookup finds a name seen before (a trace repeats a few thousand names over
// millions of events), so the hit path is what counts: one cheap multiply-xorshift hash over
// 8-byte words, an open-addressing table (power-of-two size, linear probing, at most half
// full) whose slots hold a 32-bit hash tag beside the code, and one memcmp to confirm. This
// replaces std::unordered_map<std::string_view>, whose lookup paid a generic byte hash, a
// division by a prime bucket count and a pointer chase per probe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace stallscope::kineto {

// A 64-bit hash of [p, p + n): not cryptographic, only spread well for table indexing. Names
// sharing long prefixes and suffixes ("autograd::engine::evaluate_function: MulBackward0")
// differ only inside, so every byte counts (8 per step; the tail as one overlapping word).
inline uint64_t hash_bytes(const char* p, size_t n) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;  // 2^64 / golden ratio, odd
  uint64_t h = (n + 1) * kMul;
  auto mix = [&](uint64_t w) {
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  };
  if (n >= 8) {
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
      uint64_t w;
      std::memcpy(&w, p + i, 8);
      mix(w);
    }
    if (i < n) {  // the last 8 bytes, overlapping what was hashed already
      uint64_t w;
      std::memcpy(&w, p + n - 8, 8);
      mix(w);
    }
  } else if (n >= 4) {  // two overlapping 4-byte words
    uint32_t a, b;
    std::memcpy(&a, p, 4);
    std::memcpy(&b, p + n - 4, 4);
    mix(uint64_t{a} << 32 | b);
  } else if (n > 0) {  // 1-3 bytes: first, middle, last
    auto u = [](char c) { return uint64_t{static_cast<unsigned char>(c)}; };
    mix(u(p[0]) << 16 | u(p[n / 2]) << 8 | u(p[n - 1]));
  }
  return h ^ (h >> 32);
}

// value -> code, shared by the files of one import.
class Dict {
 public:
  int32_t intern(std::string_view s) {
    uint64_t h = hash_bytes(s.data(), s.size());
    auto tag = static_cast<uint32_t>(h >> 32);
    size_t mask = slots_.size() - 1;
    if (!slots_.empty()) {
      for (size_t i = h & mask;; i = (i + 1) & mask) {
        const Slot& sl = slots_[i];
        if (sl.code < 0) break;
        if (sl.tag == tag) {
          std::string_view v = views_[static_cast<size_t>(sl.code)];
          if (v.size() == s.size() && std::memcmp(v.data(), s.data(), s.size()) == 0) {
            return sl.code;
          }
        }
      }
    }
    return add(s, h);
  }
  const std::deque<std::string>& strings() const { return strs_; }

 private:
  struct Slot {
    uint32_t tag;  // high half of the hash: most mismatches end here, without a memcmp
    int32_t code;  // -1: empty
  };
  std::deque<std::string> strs_;         // stable storage (a deque never moves its elements)
  std::vector<std::string_view> views_;  // code -> value, viewing strs_ (one indirection less)
  std::vector<Slot> slots_;

  // A new value (not found): stored, then placed; the table doubles before it is half full.
  int32_t add(std::string_view s, uint64_t h) {
    strs_.emplace_back(s);
    views_.emplace_back(strs_.back());
    auto code = static_cast<int32_t>(views_.size() - 1);
    if (views_.size() * 2 > slots_.size()) {
      slots_.assign(slots_.empty() ? 64 : slots_.size() * 2, Slot{0, -1});
      for (size_t c = 0; c < views_.size(); ++c) {
        place(hash_bytes(views_[c].data(), views_[c].size()), static_cast<int32_t>(c));
      }
    } else {
      place(h, code);
    }
    return code;
  }
  void place(uint64_t h, int32_t code) {
    size_t mask = slots_.size() - 1;
    size_t i = h & mask;
    while (slots_[i].code >= 0) i = (i + 1) & mask;
    slots_[i] = Slot{static_cast<uint32_t>(h >> 32), code};
  }
};

}  // namespace stallscope::kineto
