// Dict: string -> dense code, for the streaming Kineto reader's string columns (cat, name, args).
//
// Almost every lookup finds a name seen before (a trace repeats a few thousand names over
// millions of events), so the hit path is what counts: one cheap multiply-xorshift hash over
// 8-byte words, an open-addressing table (power-of-two size, linear probing, at most half
// full) whose slots hold a 32-bit hash tag, the length and the string's first and last 8 bytes
// beside the code: for names of up to 16 bytes (most of them) that is the whole comparison;
// longer ones take one memcmp to confirm. This replaces std::unordered_map<std::string_view>,
// whose lookup paid a generic byte hash, a division by a prime bucket count and a pointer
// chase per probe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <string_view>
#include <vector>

namespace stallscope::kineto {

// A string's bytes as two words: all of them when it has at most 16 (the first and the last 8,
// overlapping; shorter ones as overlapping 4-byte halves, or 1-3 single bytes), which with the
// length identify it; only its first and last 8 for longer ones. Every load stays inside
// [p, p + n).
struct Words {
  uint64_t a = 0, b = 0;
};
inline Words words_of(const char* p, size_t n) {
  Words w;
  if (n >= 8) {
    std::memcpy(&w.a, p, 8);
    std::memcpy(&w.b, p + n - 8, 8);
  } else if (n >= 4) {
    uint32_t x, y;
    std::memcpy(&x, p, 4);
    std::memcpy(&y, p + n - 4, 4);
    w.a = uint64_t{x} << 32 | y;
  } else if (n > 0) {
    auto u = [](char c) { return uint64_t{static_cast<unsigned char>(c)}; };
    w.a = u(p[0]) << 16 | u(p[n / 2]) << 8 | u(p[n - 1]);
  }
  return w;
}

// A 64-bit hash of [p, p + n) whose two words are `w`: not cryptographic, only spread well for
// table indexing. Names sharing long prefixes and suffixes ("autograd::engine::evaluate_function:
// MulBackward0") differ only inside, so every byte of a longer string counts (8 per step).
inline uint64_t hash_bytes(const char* p, size_t n, Words w) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;  // 2^64 / golden ratio, odd
  uint64_t h = (n + 1) * kMul;
  auto mix = [&](uint64_t x) {
    h = (h ^ x) * kMul;
    h ^= h >> 29;
  };
  mix(w.a);
  if (n > 8) mix(w.b);
  for (size_t i = 8; i + 8 < n; i += 8) {  // the middle of strings over 16 bytes
    uint64_t x;
    std::memcpy(&x, p + i, 8);
    mix(x);
  }
  return h ^ (h >> 32);
}

// value -> code, shared by the files of one import.
class Dict {
 public:
  int32_t intern(std::string_view s) {
    Words w = words_of(s.data(), s.size());
    uint64_t h = hash_bytes(s.data(), s.size(), w);
    auto tag = static_cast<uint32_t>(h >> 32);
    size_t mask = slots_.size() - 1;
    if (!slots_.empty()) {
      for (size_t i = h & mask;; i = (i + 1) & mask) {
        const Slot& sl = slots_[i];
        if (sl.code < 0) break;
        // The tag, the length and both words first: for strings of up to 16 bytes they are the
        // whole comparison (most names), for longer ones memcmp confirms.
        if (sl.tag == tag && sl.len == s.size() && sl.w.a == w.a && sl.w.b == w.b &&
            (s.size() <= 16 ||
             std::memcmp(views_[static_cast<size_t>(sl.code)].data(), s.data(), s.size()) == 0)) {
          return sl.code;
        }
      }
    }
    return add(s, h, w);
  }
  const std::deque<std::string>& strings() const { return strs_; }
  // Interns every string of `other` in its code order: other's code -> this one's code.
  std::vector<int32_t> adopt(const Dict& other) {
    std::vector<int32_t> map;
    map.reserve(other.views_.size());
    for (std::string_view v : other.views_) map.push_back(intern(v));
    return map;
  }

 private:
  struct Slot {
    uint32_t tag;  // high half of the hash: most mismatches end here
    int32_t code;  // -1: empty
    Words w;
    size_t len;
  };
  std::deque<std::string> strs_;         // stable storage (a deque never moves its elements)
  std::vector<std::string_view> views_;  // code -> value, viewing strs_ (one indirection less)
  std::vector<Slot> slots_;

  // A new value (not found): stored, then placed; the table doubles before it is half full.
  int32_t add(std::string_view s, uint64_t h, Words w) {
    strs_.emplace_back(s);
    views_.emplace_back(strs_.back());
    auto code = static_cast<int32_t>(views_.size() - 1);
    if (views_.size() * 2 > slots_.size()) {
      slots_.assign(slots_.empty() ? 64 : slots_.size() * 2, Slot{0, -1, {}, 0});
      for (size_t c = 0; c < views_.size(); ++c) {
        std::string_view v = views_[c];
        Words vw = words_of(v.data(), v.size());
        place(hash_bytes(v.data(), v.size(), vw), static_cast<int32_t>(c), vw, v.size());
      }
    } else {
      place(h, code, w, s.size());
    }
    return code;
  }
  void place(uint64_t h, int32_t code, Words w, size_t len) {
    size_t mask = slots_.size() - 1;
    size_t i = h & mask;
    while (slots_[i].code >= 0) i = (i + 1) & mask;
    slots_[i] = Slot{static_cast<uint32_t>(h >> 32), code, w, len};
  }
};

}  // namespace stallscope::kineto
