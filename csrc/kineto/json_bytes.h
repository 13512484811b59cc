// Byte-level helpers of the streaming Kineto reader's tokenizer (json_cursor.h): character
// classes, 8 bytes at a time (SWAR) for digits, 16 at a time (SSE2) for runs of plain string
// bytes and of whitespace. Callers keep every read inside their span.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace stallscope::kineto {

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

// First byte in [p, e) that ends a run of plain string bytes: '"', '\\', a control byte or a
// non-ASCII byte (those need a closer look). 16 bytes per step where SSE2 exists.
inline const char* skip_plain(const char* p, const char* e) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"');
  const __m128i backslash = _mm_set1_epi8('\\');
  const __m128i space = _mm_set1_epi8(0x20);
  while (e - p >= 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    // Signed compare: bytes >= 0x80 are negative, so "< 0x20" also catches non-ASCII.
    __m128i stop =
        _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, quote), _mm_cmpeq_epi8(v, backslash)),
                     _mm_cmplt_epi8(v, space));
    int mask = _mm_movemask_epi8(stop);
    if (mask != 0) return p + __builtin_ctz(static_cast<unsigned>(mask));
    p += 16;
  }
#endif
  while (p < e) {
    auto c = static_cast<unsigned char>(*p);
    if (c == '"' || c == '\\' || c < 0x20 || c >= 0x80) return p;
    ++p;
  }
  return p;
}

// SWAR (8 bytes in one 64-bit word, first byte lowest: x86-64 and every little-endian target).
inline uint64_t load8(const char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

// The top bit of each byte of `w` that is not an ASCII digit (0: eight digits).
inline uint64_t non_digits(uint64_t w) {
  uint64_t t = w ^ 0x3030303030303030ull;  // '0'..'9' -> 0..9
  // A byte is not a digit when t >= 10 (the low 7 bits plus 0x76 reach 0x80: no carry into the
  // next byte) or t >= 0x80 (its top bit).
  return (((t & 0x7F7F7F7F7F7F7F7Full) + 0x7676767676767676ull) | t) & 0x8080808080808080ull;
}

// How many of the 8 bytes of `w` are ASCII digits before the first other byte (0..8).
inline unsigned digit_run(uint64_t w) {
  uint64_t bad = non_digits(w);
  return bad == 0 ? 8 : static_cast<unsigned>(__builtin_ctzll(bad)) / 8;
}

// The value of the first n (1..8) digits of `w`: the digits move to the top bytes (the rest
// becomes leading zeros), then neighbours combine pairwise: 2 -> 4 -> 8 digits.
inline uint64_t digits_value(uint64_t w, unsigned n) {
  uint64_t t = (w & 0x0F0F0F0F0F0F0F0Full) << (8 * (8 - n));
  t = (t * 10 + (t >> 8)) & 0x00FF00FF00FF00FFull;
  t = (t * 100 + (t >> 16)) & 0x0000FFFF0000FFFFull;
  return (t * 10000 + (t >> 32)) & 0xFFFFFFFFull;
}

inline bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// First byte in [p, e) that is not JSON whitespace.
inline const char* skip_ws(const char* p, const char* e) {
#if defined(__SSE2__)
  const __m128i sp = _mm_set1_epi8(' ');
  const __m128i nl = _mm_set1_epi8('\n');
  const __m128i cr = _mm_set1_epi8('\r');
  const __m128i tab = _mm_set1_epi8('\t');
  while (e - p >= 16) {
    __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    __m128i ws = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, sp), _mm_cmpeq_epi8(v, nl)),
                              _mm_or_si128(_mm_cmpeq_epi8(v, cr), _mm_cmpeq_epi8(v, tab)));
    int other = ~_mm_movemask_epi8(ws) & 0xffff;
    if (other != 0) return p + __builtin_ctz(static_cast<unsigned>(other));
    p += 16;
  }
#endif
  while (p < e && is_ws(*p)) ++p;
  return p;
}

}  // namespace stallscope::kineto
