// A strict JSON tokenizer over one span of bytes, for the streaming Kineto reader.
//
// Validation is full (grammar, UTF-8, escapes, nesting depth): whatever the reader does not accept
// is "unsupported" and the caller takes its general reader, which also words the error. Running
// off the end of the span throws NeedMore while more input may follow (the reader rewinds to its
// last checkpoint and waits for the next chunk), and Unsupported{"truncated JSON"} at the end of
// the input. Every read is bounds-checked: no input can crash it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "kineto/json_bytes.h"

namespace stallscope::kineto {

struct Unsupported {
  const char* why;
};
struct NeedMore {};

class Cursor {
 public:
  static constexpr int kMaxDepth = 512;  // nesting of skipped values (orjson allows 1024)

  void reset(const char* p, const char* e, bool final) {
    p_ = p;
    e_ = e;
    final_ = final;
  }
  const char* pos() const { return p_; }
  void seek(const char* p) { p_ = p; }
  bool at_end() const { return p_ >= e_; }

  [[noreturn]] void ran_out() const {
    if (final_) throw Unsupported{"truncated JSON"};
    throw NeedMore{};
  }
  char peek() const {
    if (p_ >= e_) ran_out();
    return *p_;
  }
  char next() {
    if (p_ >= e_) ran_out();
    return *p_++;
  }
  void expect(char c) {
    if (next() != c) throw Unsupported{"malformed JSON"};
  }
  void ws() {
    // Most calls find no whitespace: a byte above 0x20 cannot be one. Pretty-printed traces
    // indent with runs of spaces after each newline: 16 bytes per step there.
    if (p_ < e_ && static_cast<unsigned char>(*p_) > 0x20) return;
    p_ = skip_ws(p_, e_);
  }
  void literal(const char* lit) {
    size_t n = std::strlen(lit);
    for (size_t i = 0; i < n; ++i) {
      if (p_ + i >= e_) ran_out();
      if (p_[i] != lit[i]) throw Unsupported{"malformed JSON"};
    }
    p_ += n;
  }
  bool null_here() {
    if (peek() == 'n') {
      literal("null");
      return true;
    }
    return false;
  }

  // A JSON string at p_ (which must be '"'): its decoded value, a view into the input when it
  // has no escapes, else into scratch_ (valid until the next call).
  std::string_view str() {
    if (next() != '"') throw Unsupported{"malformed JSON"};
    const char* s = p_;
    for (;;) {
      p_ = skip_plain(p_, e_);
      if (p_ >= e_) ran_out();
      auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        std::string_view v(s, static_cast<size_t>(p_ - s));
        ++p_;
        return v;
      }
      if (c == '\\') break;
      if (c < 0x20) throw Unsupported{"control character in string"};
      utf8();
    }
    scratch_.assign(s, static_cast<size_t>(p_ - s));
    for (;;) {
      const char* run = p_;
      p_ = skip_plain(p_, e_);
      scratch_.append(run, static_cast<size_t>(p_ - run));
      if (p_ >= e_) ran_out();
      auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return scratch_;
      }
      if (c == '\\') {
        ++p_;
        escape();
      } else if (c < 0x20) {
        throw Unsupported{"control character in string"};
      } else {
        const char* at = p_;
        utf8();
        scratch_.append(at, static_cast<size_t>(p_ - at));
      }
    }
  }

  // A short plain key (1..6 ASCII bytes, no escapes) at p_, as Kineto writes event keys: its
  // value without the general string path; an empty view when the key is not of that form (p_
  // unchanged: the caller then takes str()).
  std::string_view short_key() {
    if (e_ - p_ < 8 || *p_ != '"') return {};
    const char* s = p_ + 1;
    for (int i = 0; i < 7; ++i) {
      auto c = static_cast<unsigned char>(s[i]);
      if (c == '"') {
        if (i == 0) return {};
        p_ = s + i + 1;
        return {s, static_cast<size_t>(i)};
      }
      if (c == '\\' || c < 0x20 || c >= 0x80) return {};
    }
    return {};
  }

  // A JSON number token at p_: its text; *is_int when it has no fraction or exponent. The
  // token must be followed by a byte (a number cannot end the input here).
  std::string_view number(bool* is_int) {
    const char* s = p_;
    if (peek() == '-') ++p_;
    char c = peek();
    if (c == '0') {
      ++p_;
    } else if (c >= '1' && c <= '9') {
      digits();
    } else {
      throw Unsupported{"malformed number"};
    }
    *is_int = true;
    if (peek() == '.') {
      ++p_;
      *is_int = false;
      if (!is_digit(peek())) throw Unsupported{"malformed number"};
      digits();
    }
    c = peek();
    if (c == 'e' || c == 'E') {
      ++p_;
      *is_int = false;
      c = peek();
      if (c == '+' || c == '-') ++p_;
      if (!is_digit(peek())) throw Unsupported{"malformed number"};
      digits();
      peek();  // the token's end must be in the span
    }
    return {s, static_cast<size_t>(p_ - s)};
  }

  // A JSON number at p_, read once: true with *v when it is an integer of at most 18 digits;
  // false otherwise, *is_int saying whether it was an integer (longer) or had a fraction or
  // exponent, *text its token.
  bool integer(int64_t* v, bool* is_int, std::string_view* text) {
    if (e_ - p_ >= 32 && integer_swar(v, text)) {
      *is_int = true;
      return true;
    }
    return integer_bytewise(v, is_int, text);
  }

  // integer() one byte at a time: near the span's end, and for what integer_swar() refuses.
  [[gnu::noinline]] bool integer_bytewise(int64_t* v, bool* is_int, std::string_view* text) {
    const char* s = p_;
    bool neg = false;
    if (peek() == '-') {
      neg = true;
      ++p_;
    }
    char c = peek();
    int64_t x = 0;
    int nd = 0;
    if (c == '0') {
      ++p_;
      nd = 1;
      if (p_ >= e_) ran_out();
    } else if (c >= '1' && c <= '9') {
      while (p_ < e_ && is_digit(*p_)) {
        if (nd < 18) x = x * 10 + (*p_ - '0');
        ++nd;
        ++p_;
      }
      if (p_ >= e_) ran_out();
    } else {
      throw Unsupported{"malformed number"};
    }
    c = *p_;
    if (c == '.' || c == 'e' || c == 'E') {
      p_ = s;
      *text = number(is_int);
      return false;
    }
    *is_int = true;
    *text = std::string_view(s, static_cast<size_t>(p_ - s));
    if (nd > 18) return false;
    *v = neg ? -x : x;
    return true;
  }

  void skip_value(int depth) {
    if (depth > kMaxDepth) throw Unsupported{"nesting too deep"};
    ws();
    char c = peek();
    if (c == '"') {
      if (plain_str().data() == nullptr) str();
    } else if (c == '{') {
      ++p_;
      ws();
      if (peek() == '}') {
        ++p_;
        return;
      }
      for (;;) {
        ws();
        str();
        ws();
        expect(':');
        skip_value(depth + 1);
        ws();
        char d = next();
        if (d == '}') return;
        if (d != ',') throw Unsupported{"malformed JSON"};
      }
    } else if (c == '[') {
      ++p_;
      ws();
      if (peek() == ']') {
        ++p_;
        return;
      }
      for (;;) {
        // Plain strings and numbers (record_shapes' "Input type" / "Input Dims" lists, the
        // grid and block of kernels) here, without a call per element; anything else
        // through skip_value().
        ws();
        char e = peek();
        if (depth >= kMaxDepth) {  // skip_value() refuses the element's depth
          skip_value(depth + 1);
        } else if (e == '"') {
          if (plain_str().data() == nullptr) str();
        } else if (is_digit(e) || e == '-') {
          skip_number();
        } else {
          skip_value(depth + 1);
        }
        ws();
        char d = next();
        if (d == ']') return;
        if (d != ',') throw Unsupported{"malformed JSON"};
      }
    } else if (c == 't') {
      literal("true");
    } else if (c == 'f') {
      literal("false");
    } else if (c == 'n') {
      literal("null");
    } else {
      skip_number();
    }
  }

  // A JSON number at p_, its grammar checked and its value not computed: 8 digits per step
  // where the span has kSkipMargin bytes left and each part has at most 24 digits; number()
  // otherwise (which also refuses what is not a number).
  void skip_number() {
    const char* q = p_ + (*p_ == '-');
    if (e_ - p_ < kSkipMargin || !is_digit(*q)) return skip_number_bytewise();
    if (*q == '0') {
      ++q;  // a leading zero is the whole integer part ("01": the caller finds '1' next)
    } else if ((q = digit_span(q)) == nullptr) {
      return skip_number_bytewise();
    }
    if (*q == '.') {
      const char* f = digit_span(q + 1);
      if (f == nullptr || f == q + 1) return skip_number_bytewise();  // none: number() refuses
      q = f;
    }
    if (*q == 'e' || *q == 'E') return skip_number_bytewise();
    p_ = q;
  }

  // integer()'s common case alone (integer_swar): false, p_ unchanged, for anything else.
  bool integer_quick(int64_t* v) {
    std::string_view text;
    return e_ - p_ >= 32 && integer_swar(v, &text);
  }

  // A number with a fraction and no exponent, of at most 19 digits whose value as an integer
  // is at most 2^53 (Kineto's float times in µs: "4458676522690.655"), as the nearest double.
  // That integer and the power of ten it is divided by are both exact in a double, so the one
  // correctly rounded division gives what strtod and from_chars give (Clinger's fast path).
  // False (p_ unchanged) for anything else, and with fewer than kSkipMargin bytes left: the
  // caller then reads the number the general way, which also words any error.
  bool decimal_fast(double* d) {
    if (e_ - p_ < kSkipMargin) return false;
    bool neg = *p_ == '-';
    const char* q = p_ + neg;
    const char* point;
    if (*q == '0') {
      point = q + 1;  // a leading zero is the whole integer part
    } else if (!is_digit(*q) || (point = digit_span(q)) == nullptr) {
      return false;
    }
    if (*point != '.') return false;
    const char* f = digit_span(point + 1);
    if (f == nullptr || f == point + 1 || *f == 'e' || *f == 'E') return false;
    auto ni = static_cast<unsigned>(point - q), nf = static_cast<unsigned>(f - point - 1);
    if (ni + nf > 19) return false;
    uint64_t m = digits_u64(q, ni) * kPow10u[nf] + digits_u64(point + 1, nf);
    if (m > (uint64_t{1} << 53)) return false;
    double x = static_cast<double>(m) / kPow10d[nf];  // both exact
    *d = neg ? -x : x;
    p_ = f;
    return true;
  }

  // Bytes left in the span, and unchecked access for callers that checked them.
  ptrdiff_t left() const { return e_ - p_; }
  uint64_t word() const { return load8(p_); }
  unsigned word16() const {
    uint16_t w;
    std::memcpy(&w, p_, 2);
    return w;
  }
  void skip(size_t n) { p_ += n; }

  // A JSON string at p_ (which must be '"') without escapes or non-ASCII, ending in the span:
  // its value; else an empty view and p_ unchanged (the caller then takes str()).
  std::string_view plain_str() {
    const char* s = p_ + 1;
    const char* q = skip_plain(s, e_);
    if (q >= e_ || *q != '"') return {};
    p_ = q + 1;
    return {s, static_cast<size_t>(q - s)};
  }

 private:
  const char* p_ = nullptr;
  const char* e_ = nullptr;
  bool final_ = true;
  std::string scratch_;

  // integer()'s common case, 8 digits per step: an integer of at most 18 digits with no
  // leading zero, fraction or exponent, at least 32 bytes (sign, 24 digits, next byte) before
  // the span's end. False (p_ unchanged) for anything else: integer() then reads it bytewise.
  // The three words are loaded and classified independently (no step waits for the previous
  // one's digit count: a 16-digit ts costs one word's latency, not three). Inlined into each
  // caller: as a call of its own, with `text` through memory, the V100 scan took 6 % more
  // instructions.
  [[gnu::always_inline]] bool integer_swar(int64_t* v, std::string_view* text) {
    const char* q = p_ + (*p_ == '-');
    uint64_t w0 = load8(q);
    uint64_t bad0 = non_digits(w0);
    uint64_t x;
    unsigned nd;
    if (bad0 != 0) {  // fewer than 8 digits (pid, tid, dur, ids): the end is in this word
      unsigned sh = static_cast<unsigned>(__builtin_ctzll(bad0)) - 7;  // 8 x digits
      auto c = static_cast<unsigned char>(w0 >> sh);                   // the byte after them
      // Refused: no digit, a leading zero, or a fraction / exponent after the digits.
      if (sh == 0 || ((w0 & 0xFF) == '0' && sh > 8) || c == '.' || (c | 0x20) == 'e') {
        return false;
      }
      nd = sh / 8;
      x = digits_value(w0, nd);
    } else {  // 8 or more (ts): two more words, classified independently
      if ((w0 & 0xFF) == '0') return false;
      uint64_t w1 = load8(q + 8), w2 = load8(q + 16);
      unsigned n1 = digit_run(w1), n2 = digit_run(w2);
      if (n1 == 8 && n2 == 0) {  // exactly 16 digits: Kineto's ts in µs since the epoch
        const char* r = q + 16;
        if (*r == '.' || *r == 'e' || *r == 'E') return false;
        x = digits_value(w0, 8) * 100000000 + digits_value(w1, 8);
        *text = std::string_view(p_, static_cast<size_t>(r - p_));
        *v = *p_ == '-' ? -static_cast<int64_t>(x) : static_cast<int64_t>(x);
        p_ = r;
        return true;
      }
      nd = n1 < 8 ? 8 + n1 : 16 + n2;
      if (nd > 18) return false;
      const char* r = q + nd;
      if (*r == '.' || *r == 'e' || *r == 'E') return false;
      x = digits_value(w0, 8);
      unsigned m1 = n1 < 8 ? n1 : 8;
      if (m1 > 0) x = x * kPow10u[m1] + digits_value(w1, m1);
      if (nd > 16) x = x * kPow10u[n2] + digits_value(w2, n2);
    }
    const char* r = q + nd;
    *text = std::string_view(p_, static_cast<size_t>(r - p_));
    *v = *p_ == '-' ? -static_cast<int64_t>(x) : static_cast<int64_t>(x);
    p_ = r;
    return true;
  }

  // Bytes skip_number() needs left in the span: a sign, 24 integer digits, the point, 24
  // fraction digits and the 8-byte word loaded at the last of them stay inside it.
  static constexpr ptrdiff_t kSkipMargin = 64;

  // The end of the run of ASCII digits at q (none: q itself), or nullptr past 24 digits. Reads
  // up to 24 bytes after q: skip_number() calls it with kSkipMargin bytes left.
  static const char* digit_span(const char* q) {
    for (int words = 0; words < 3; ++words) {
      unsigned n = digit_run(load8(q));
      q += n;
      if (n < 8) return q;
    }
    return nullptr;
  }

  // 10^0 .. 10^19: every power of ten a uint64_t holds, and (as doubles) all exact.
  static constexpr std::array<uint64_t, 20> kPow10u = [] {
    std::array<uint64_t, 20> a{};
    uint64_t x = 1;
    for (auto& v : a) {
      v = x;
      x *= 10;  // wraps past the last one, unused
    }
    return a;
  }();
  static constexpr std::array<double, 20> kPow10d = [] {
    std::array<double, 20> a{};
    for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<double>(kPow10u[i]);
    return a;
  }();

  // The value of the n (0..19) ASCII digits at q, 8 per step (reads whole 8-byte words).
  static uint64_t digits_u64(const char* q, unsigned n) {
    uint64_t x = 0;
    for (; n >= 8; n -= 8, q += 8) x = x * 100000000 + digits_value(load8(q), 8);
    return n == 0 ? x : x * kPow10u[n] + digits_value(load8(q), n);
  }

  [[gnu::noinline]] void skip_number_bytewise() {
    bool is_int;
    number(&is_int);
  }

  void digits() {
    while (p_ < e_ && is_digit(*p_)) ++p_;
    if (p_ >= e_) ran_out();  // the number may go on in the next chunk
  }

  unsigned byte_at(size_t i) const {
    if (p_ + i >= e_) ran_out();
    return static_cast<unsigned char>(p_[i]);
  }

  // One UTF-8 sequence starting at p_ (a byte >= 0x80), validated and consumed.
  void utf8() {
    unsigned c = byte_at(0);
    auto cont = [&](size_t i, unsigned lo, unsigned hi) {
      unsigned x = byte_at(i);
      if (x < lo || x > hi) throw Unsupported{"invalid UTF-8"};
    };
    if (c >= 0xC2 && c <= 0xDF) {
      cont(1, 0x80, 0xBF);
      p_ += 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      cont(1, c == 0xE0 ? 0xA0 : 0x80, c == 0xED ? 0x9F : 0xBF);
      cont(2, 0x80, 0xBF);
      p_ += 3;
    } else if (c >= 0xF0 && c <= 0xF4) {
      cont(1, c == 0xF0 ? 0x90 : 0x80, c == 0xF4 ? 0x8F : 0xBF);
      cont(2, 0x80, 0xBF);
      cont(3, 0x80, 0xBF);
      p_ += 4;
    } else {
      throw Unsupported{"invalid UTF-8"};
    }
  }

  unsigned hex4() {
    unsigned v = 0;
    for (size_t i = 0; i < 4; ++i) {
      auto c = static_cast<char>(byte_at(i));
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= static_cast<unsigned>(c - 'A' + 10);
      else
        throw Unsupported{"bad escape"};
    }
    p_ += 4;
    return v;
  }

  void put_utf8(unsigned cp) {
    if (cp < 0x80) {
      scratch_.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      scratch_.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      scratch_.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      scratch_.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      scratch_.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      scratch_.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      scratch_.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      scratch_.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      scratch_.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      scratch_.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  // The escape after a backslash (already consumed), decoded into scratch_.
  void escape() {
    char esc = next();
    switch (esc) {
      case '"':
      case '\\':
      case '/':
        scratch_.push_back(esc);
        return;
      case 'b':
        scratch_.push_back('\b');
        return;
      case 'f':
        scratch_.push_back('\f');
        return;
      case 'n':
        scratch_.push_back('\n');
        return;
      case 'r':
        scratch_.push_back('\r');
        return;
      case 't':
        scratch_.push_back('\t');
        return;
      case 'u': {
        unsigned cp = hex4();
        if (cp >= 0xDC00 && cp <= 0xDFFF) throw Unsupported{"lone surrogate"};
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          if (byte_at(0) != '\\' || byte_at(1) != 'u') throw Unsupported{"lone surrogate"};
          p_ += 2;
          unsigned lo = hex4();
          if (lo < 0xDC00 || lo > 0xDFFF) throw Unsupported{"lone surrogate"};
          cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        }
        put_utf8(cp);
        return;
      }
      default:
        throw Unsupported{"bad escape"};
    }
  }
};

}  // namespace stallscope::kineto
