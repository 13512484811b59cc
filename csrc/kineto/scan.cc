// The Kineto JSON scanner (see scan.h). A recursive-descent pass with strict JSON validation
// (grammar, UTF-8, escapes, depth): anything it does not accept falls back to the general reader.
#include "kineto/scan.h"

#include <charconv>
#include <cmath>
#include <cstring>

namespace stallscope::kineto {

int32_t Dict::intern(std::string_view s) {
  auto it = index_.find(s);
  if (it != index_.end()) return it->second;
  strs_.emplace_back(s);
  auto code = static_cast<int32_t>(strs_.size() - 1);
  index_.emplace(std::string_view(strs_.back()), code);
  return code;
}

namespace {

struct Unsupported {
  const char* why;
};

constexpr int kMaxDepth = 512;                // nesting of skipped values (orjson allows 1024)
constexpr int64_t kMaxIp = 9000000000000000;  // ns_from_decimal: integer µs below 9e15

enum ArgKind { kArgInt, kArgStr, kArgIgnored };
struct ArgKey {
  std::string_view key;
  ArgKind kind;
  int field;  // IntField or StrField
};
constexpr ArgKey kArgKeys[] = {
    {"External id", kArgInt, kExtId},
    {"correlation", kArgInt, kCorrelation},
    {"stream", kArgInt, kStream},
    {"device", kArgInt, kDevice},
    {"bytes", kArgInt, kBytes},
    {"cuda_sync_kind", kArgStr, kSyncKind},
    {"Collective name", kArgStr, kColl},
    {"In msg nelems", kArgInt, kInNelems},
    {"Out msg nelems", kArgInt, kOutNelems},
    {"Group size", kArgInt, kGroupSize},
    {"dtype", kArgStr, kDtype},
    {"Process Group Name", kArgStr, kPg},
    {"Process Group Description", kArgStr, kPgDesc},
    {"Process Group Ranks", kArgStr, kPgRanks},
    {"Global rank start", kArgIgnored, 0},
    {"Global rank stride", kArgIgnored, 0},
};

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

EvKey event_key(std::string_view k) {
  switch (k.size()) {
    case 2:
      if (k == "ph") return kEvPh;
      if (k == "ts") return kEvTs;
      if (k == "id") return kEvId;
      if (k == "bp") return kEvBp;
      break;
    case 3:
      if (k == "cat") return kEvCat;
      if (k == "pid") return kEvPid;
      if (k == "tid") return kEvTid;
      if (k == "dur") return kEvDur;
      break;
    case 4:
      if (k == "name") return kEvName;
      if (k == "args") return kEvArgs;
      break;
    default:
      break;
  }
  return kEvOther;
}

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Scanner {
 public:
  Scanner(std::string_view d, ScanResult& r)
      : b_(d.data()), p_(d.data()), e_(d.data() + d.size()), r_(r) {}

  void run() {
    ws();
    expect('{');
    ws();
    bool found = false;
    if (peek() == '}') {
      ++p_;
    } else {
      for (;;) {
        ws();
        const char* key_at = p_;
        std::string_view k = str();
        ws();
        expect(':');
        ws();
        if (k == "traceEvents") {
          if (found) throw Unsupported{"duplicate traceEvents"};
          found = true;
          r_.events_begin = static_cast<size_t>(key_at - b_);
          events();
          r_.events_end = static_cast<size_t>(p_ - b_);
        } else {
          skip_value(0);
        }
        ws();
        char c = next();
        if (c == '}') break;
        if (c != ',') throw Unsupported{"malformed JSON"};
      }
    }
    ws();
    if (p_ != e_) throw Unsupported{"trailing data"};
    if (!found) throw Unsupported{"no traceEvents"};
  }

 private:
  const char* b_;
  const char* p_;
  const char* e_;
  ScanResult& r_;
  std::string scratch_;

  char peek() const { return p_ < e_ ? *p_ : '\0'; }
  char next() {
    if (p_ >= e_) throw Unsupported{"truncated JSON"};
    return *p_++;
  }
  void expect(char c) {
    if (next() != c) throw Unsupported{"malformed JSON"};
  }
  void ws() {
    while (p_ < e_ && (*p_ == ' ' || *p_ == '\n' || *p_ == '\r' || *p_ == '\t')) ++p_;
  }
  void literal(const char* lit) {
    size_t n = std::strlen(lit);
    if (static_cast<size_t>(e_ - p_) < n || std::memcmp(p_, lit, n) != 0) {
      throw Unsupported{"malformed JSON"};
    }
    p_ += n;
  }

  // One UTF-8 sequence starting at p_ (a byte >= 0x80), validated and consumed.
  void utf8() {
    auto u = [&](size_t i) -> unsigned {
      if (p_ + i >= e_) throw Unsupported{"truncated UTF-8"};
      return static_cast<unsigned char>(p_[i]);
    };
    unsigned c = u(0);
    auto cont = [&](size_t i, unsigned lo, unsigned hi) {
      unsigned x = u(i);
      if (x < lo || x > hi) throw Unsupported{"invalid UTF-8"};
    };
    if (c >= 0xC2 && c <= 0xDF) {
      cont(1, 0x80, 0xBF);
      p_ += 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      unsigned lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
      cont(1, lo, hi);
      cont(2, 0x80, 0xBF);
      p_ += 3;
    } else if (c >= 0xF0 && c <= 0xF4) {
      unsigned lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
      cont(1, lo, hi);
      cont(2, 0x80, 0xBF);
      cont(3, 0x80, 0xBF);
      p_ += 4;
    } else {
      throw Unsupported{"invalid UTF-8"};
    }
  }

  unsigned hex4() {
    if (e_ - p_ < 4) throw Unsupported{"truncated escape"};
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = p_[i];
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

  // A JSON string at p_ (which must be '"'): its decoded value, a view into the input when it
  // has no escapes, else into scratch_ (valid until the next call).
  std::string_view str() {
    if (next() != '"') throw Unsupported{"malformed JSON"};
    const char* s = p_;
    for (;;) {
      if (p_ >= e_) throw Unsupported{"truncated string"};
      auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        std::string_view v(s, static_cast<size_t>(p_ - s));
        ++p_;
        return v;
      }
      if (c == '\\') break;
      if (c < 0x20) throw Unsupported{"control character in string"};
      if (c >= 0x80)
        utf8();
      else
        ++p_;
    }
    scratch_.assign(s, static_cast<size_t>(p_ - s));
    for (;;) {
      if (p_ >= e_) throw Unsupported{"truncated string"};
      auto c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        ++p_;
        return scratch_;
      }
      if (c == '\\') {
        ++p_;
        char esc = next();
        switch (esc) {
          case '"':
            scratch_.push_back('"');
            break;
          case '\\':
            scratch_.push_back('\\');
            break;
          case '/':
            scratch_.push_back('/');
            break;
          case 'b':
            scratch_.push_back('\b');
            break;
          case 'f':
            scratch_.push_back('\f');
            break;
          case 'n':
            scratch_.push_back('\n');
            break;
          case 'r':
            scratch_.push_back('\r');
            break;
          case 't':
            scratch_.push_back('\t');
            break;
          case 'u': {
            unsigned cp = hex4();
            if (cp >= 0xDC00 && cp <= 0xDFFF) throw Unsupported{"lone surrogate"};
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              if (e_ - p_ < 2 || p_[0] != '\\' || p_[1] != 'u') throw Unsupported{"lone surrogate"};
              p_ += 2;
              unsigned lo = hex4();
              if (lo < 0xDC00 || lo > 0xDFFF) throw Unsupported{"lone surrogate"};
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            put_utf8(cp);
            break;
          }
          default:
            throw Unsupported{"bad escape"};
        }
        continue;
      }
      if (c < 0x20) throw Unsupported{"control character in string"};
      if (c >= 0x80) {
        const char* at = p_;
        utf8();
        scratch_.append(at, static_cast<size_t>(p_ - at));
      } else {
        scratch_.push_back(static_cast<char>(c));
        ++p_;
      }
    }
  }

  // A JSON number token at p_: its text; *is_int when it has no fraction or exponent.
  std::string_view number(bool* is_int) {
    const char* s = p_;
    if (peek() == '-') ++p_;
    if (peek() == '0') {
      ++p_;
    } else if (p_ < e_ && *p_ >= '1' && *p_ <= '9') {
      while (p_ < e_ && is_digit(*p_)) ++p_;
    } else {
      throw Unsupported{"malformed number"};
    }
    *is_int = true;
    if (peek() == '.') {
      ++p_;
      *is_int = false;
      if (!(p_ < e_ && is_digit(*p_))) throw Unsupported{"malformed number"};
      while (p_ < e_ && is_digit(*p_)) ++p_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++p_;
      *is_int = false;
      if (peek() == '+' || peek() == '-') ++p_;
      if (!(p_ < e_ && is_digit(*p_))) throw Unsupported{"malformed number"};
      while (p_ < e_ && is_digit(*p_)) ++p_;
    }
    return {s, static_cast<size_t>(p_ - s)};
  }

  void skip_value(int depth) {
    if (depth > kMaxDepth) throw Unsupported{"nesting too deep"};
    ws();
    char c = peek();
    if (c == '"') {
      str();
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
        skip_value(depth + 1);
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
      bool is_int;
      number(&is_int);
    }
  }

  bool null_here() {
    if (peek() == 'n') {
      literal("null");
      return true;
    }
    return false;
  }

  // Signed decimal digits (<= 18) -> value; false when not of that form.
  static bool small_int(std::string_view t, int64_t* v) {
    size_t i = 0;
    bool neg = false;
    if (i < t.size() && (t[i] == '-' || t[i] == '+')) neg = t[i++] == '-';
    size_t nd = t.size() - i;
    if (nd == 0 || nd > 18) return false;
    int64_t x = 0;
    for (; i < t.size(); ++i) {
      if (!is_digit(t[i])) return false;
      x = x * 10 + (t[i] - '0');
    }
    *v = neg ? -x : x;
    return true;
  }

  // An integer field (pid, tid, id, numeric args) as the general reader's string -> Int64 cast.
  void int_field(IntCol& col) {
    char c = peek();
    if (null_here()) return;
    int64_t v = 0;
    if (c == '"') {
      std::string_view s = str();
      bool digit = false;
      for (char ch : s) digit = digit || is_digit(ch);
      if (!digit) return;  // "Spans", "Traces": null
      if (!small_int(s, &v)) throw Unsupported{"numeric string in an integer field"};
    } else if (c == '-' || is_digit(c)) {
      bool is_int;
      std::string_view t = number(&is_int);
      if (!is_int || !small_int(t, &v)) throw Unsupported{"non-integer in an integer field"};
    } else {
      throw Unsupported{"non-scalar in an integer field"};
    }
    col.values.back() = v;
    col.valid.back() = 1;
  }

  void str_field(StrCol& col) {
    if (null_here()) return;
    if (peek() != '"') throw Unsupported{"non-string in a string field"};
    col.codes.back() = col.dict.intern(str());
  }

  // ts / dur: integer ns as ns_from_decimal on the value's shortest round-trip text in fixed
  // notation (what the general reader sees); *is_float when that text has a '.'.
  void time_field(IntCol& col, std::vector<uint8_t>& has, uint8_t* is_float, double* f64,
                  bool* any_float) {
    if (null_here()) return;
    char c = peek();
    if (!(c == '-' || is_digit(c))) throw Unsupported{"non-number time"};
    bool is_int;
    std::string_view t = number(&is_int);
    has.back() = 1;
    char buf[512];
    std::string_view s = t;
    if (!is_int) {
      double d = 0;
      auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), d);
      if (ec != std::errc() || ptr != t.data() + t.size() || !std::isfinite(d) ||
          (d == 0 && std::signbit(d))) {
        throw Unsupported{"float time out of range"};
      }
      auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::fixed);
      if (res.ec != std::errc()) throw Unsupported{"float time out of range"};
      s = std::string_view(buf, static_cast<size_t>(res.ptr - buf));
      *f64 = d;
      *any_float = true;
    } else {
      size_t nd = t.size() - (t[0] == '-' ? 1 : 0);
      if (nd > 18) throw Unsupported{"integer time beyond int64"};
      if (t == "-0") s = "0";
      int64_t iv = 0;
      if (small_int(t, &iv)) *f64 = static_cast<double>(iv);
    }
    size_t i = 0;
    bool neg = false;
    if (i < s.size() && s[i] == '-') neg = true, ++i;
    size_t ip_begin = i;
    while (i < s.size() && is_digit(s[i])) ++i;
    size_t nip = i - ip_begin;
    bool dot = i < s.size() && s[i] == '.';
    if (is_float != nullptr) *is_float = dot ? 1 : 0;
    if (nip == 0 || nip > 16) return;  // null ns (|value| >= 1e16 µs)
    int64_t ip = 0;
    for (size_t k = ip_begin; k < ip_begin + nip; ++k) ip = ip * 10 + (s[k] - '0');
    if (ip >= kMaxIp) return;
    int64_t frac = 0;
    if (dot) ++i;
    for (int k = 0; k < 3; ++k) {
      frac *= 10;
      if (dot && i < s.size() && is_digit(s[i])) frac += s[i++] - '0';
    }
    int64_t ns = ip * 1000 + frac;
    col.values.back() = neg ? -ns : ns;
    col.valid.back() = 1;
  }

  void args() {
    if (null_here()) return;
    if (next() != '{') throw Unsupported{"args not an object"};
    ws();
    if (peek() == '}') {
      ++p_;
      return;
    }
    uint32_t seen = 0;
    for (;;) {
      ws();
      std::string_view k = str();
      ws();
      expect(':');
      ws();
      int which = -1;
      for (int j = 0; j < static_cast<int>(std::size(kArgKeys)); ++j) {
        if (kArgKeys[j].key == k) {
          which = j;
          break;
        }
      }
      if (which < 0) {
        skip_value(1);
      } else {
        if (seen & (1u << which)) throw Unsupported{"duplicate arg"};
        seen |= 1u << which;
        const ArgKey& a = kArgKeys[which];
        if (a.kind == kArgInt) {
          int_field(r_.ints[a.field]);
        } else if (a.kind == kArgStr) {
          str_field(r_.str[a.field]);
        } else {
          char c = peek();
          if (c == '{' || c == '[' || c == 't' || c == 'f') throw Unsupported{"non-scalar arg"};
          skip_value(1);
        }
      }
      ws();
      char d = next();
      if (d == '}') return;
      if (d != ',') throw Unsupported{"malformed JSON"};
    }
  }

  void new_row() {
    for (auto& c : r_.str) c.codes.push_back(-1);
    for (auto& c : r_.ints) {
      c.values.push_back(0);
      c.valid.push_back(0);
    }
    r_.has_ts.push_back(0);
    r_.has_dur.push_back(0);
    r_.ts_is_float.push_back(0);
    r_.ts_f64.push_back(0);
    r_.dur_f64.push_back(0);
    ++r_.rows;
  }

  void event() {
    if (next() != '{') throw Unsupported{"event not an object"};
    new_row();
    ws();
    if (peek() == '}') {
      ++p_;
      return;
    }
    uint32_t seen = 0;
    for (;;) {
      ws();
      EvKey k = event_key(str());
      ws();
      expect(':');
      ws();
      if (k != kEvOther) {
        if (seen & (1u << k)) throw Unsupported{"duplicate event key"};
        seen |= 1u << k;
      }
      switch (k) {
        case kEvPh:
          str_field(r_.str[kPh]);
          break;
        case kEvCat:
          str_field(r_.str[kCat]);
          break;
        case kEvName:
          str_field(r_.str[kName]);
          break;
        case kEvPid:
          int_field(r_.ints[kPid]);
          break;
        case kEvTid:
          int_field(r_.ints[kTid]);
          break;
        case kEvId:
          int_field(r_.ints[kId]);
          break;
        case kEvTs:
          time_field(r_.ints[kTsNs], r_.has_ts, &r_.ts_is_float.back(), &r_.ts_f64.back(),
                     &r_.ts_any_float);
          break;
        case kEvDur:
          time_field(r_.ints[kDurNs], r_.has_dur, nullptr, &r_.dur_f64.back(), &r_.dur_any_float);
          break;
        case kEvArgs:
          args();
          break;
        case kEvBp: {
          char c = peek();
          if (c == '{' || c == '[' || c == 't' || c == 'f') throw Unsupported{"non-scalar bp"};
          skip_value(1);
          break;
        }
        default:
          skip_value(1);
          break;
      }
      ws();
      char d = next();
      if (d == '}') return;
      if (d != ',') throw Unsupported{"malformed JSON"};
    }
  }

  void events() {
    if (next() != '[') throw Unsupported{"traceEvents not a list"};
    ws();
    if (peek() == ']') {
      ++p_;
      return;
    }
    for (;;) {
      ws();
      event();
      ws();
      char d = next();
      if (d == ']') return;
      if (d != ',') throw Unsupported{"malformed JSON"};
    }
  }
};

}  // namespace

void scan(std::string_view data, ScanResult& out) {
  size_t guess = data.size() / 200;  // ~200 bytes per Kineto event
  for (auto& c : out.str) c.codes.reserve(guess);
  for (auto& c : out.ints) {
    c.values.reserve(guess);
    c.valid.reserve(guess);
  }
  try {
    Scanner(data, out).run();
    out.ok = true;
  } catch (const Unsupported& u) {
    out = ScanResult();
    out.ok = false;
    out.reason = u.why;
  }
}

}  // namespace stallscope::kineto
