// LayoutMemo: the bytes between one value and the next key's value, as a trace's writer laid
// them out last time, so that the streaming Kineto reader can step over a separator, a key and
// its colon with one compare instead of reading them token by token.
//
// A writer lays every event of one kind out alike: Kineto writes `{\n    "ph": ` before an
// event's first value, `, "cat": ` between ph and cat, `,\n    "ts": ` before ts, and
// `\n  }` after the last value. The reader keeps, per layout class (the event's ph, or the
// category of the event whose args it reads) and per position of a key in its object, the last
// gap it read there: the separator (none before the first key), the key, the colon and the
// blanks up to the value (or the closing brace, for the end). Where the next bytes equal that
// gap, they are that key (or the end), with nothing else between: they are the bytes a
// token-by-token reading took there before, so it would read them the same way again, and the
// result does not depend on whether the memo was used. Where they differ, the reader reads the
// gap token by token and keeps it for next time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace stallscope::kineto {

struct Gap {
  static constexpr size_t kMax = 32;  // longer gaps are not kept
  static_assert(kMax == 32, "matches() compares two 16-byte halves; mask has a bit per byte");
  alignas(16) char text[kMax];
  uint32_t mask = 0;  // bit i set for each byte i of the gap (0: none kept)
  uint8_t len = 0;
  int8_t key = 0;  // what follows: the reader's key code, or its end mark

  // Whether the kMax bytes at p begin with this gap (p must have kMax bytes readable).
  bool matches(const char* p) const {
#if defined(__SSE2__)
    __m128i a0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    __m128i a1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 16));
    __m128i b0 = _mm_load_si128(reinterpret_cast<const __m128i*>(text));
    __m128i b1 = _mm_load_si128(reinterpret_cast<const __m128i*>(text + 16));
    auto eq = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(a0, b0))) |
              static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(a1, b1))) << 16;
    return mask != 0 && (~eq & mask) == 0;
#else
    return len != 0 && std::memcmp(p, text, len) == 0;
#endif
  }

  // Keeps [from, to) followed by `k` (nothing when longer than kMax or empty).
  void learn(const char* from, const char* to, int k) {
    auto n = static_cast<size_t>(to - from);
    if (n == 0 || n > kMax) {
      mask = 0;
      len = 0;
      return;
    }
    std::memcpy(text, from, n);
    len = static_cast<uint8_t>(n);
    mask = n == kMax ? ~uint32_t{0} : (uint32_t{1} << n) - 1;
    key = static_cast<int8_t>(k);
  }
};

// Gaps by layout class and key position. Positions past kPositions are read token by token.
template <unsigned kClasses, unsigned kPositions>
struct LayoutMemo {
  Gap gaps[kClasses][kPositions];

  // The gaps of one class, by position (classes beyond kClasses share).
  Gap* row(unsigned cls) { return gaps[cls % kClasses]; }
  static constexpr unsigned positions() { return kPositions; }
};

}  // namespace stallscope::kineto
