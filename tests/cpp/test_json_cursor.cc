// The JSON cursor of the streaming Kineto reader (csrc/kineto/json_cursor.h): strings and their
// escapes, numbers (the 8-bytes-a-step readers checked against the byte-wise ones and against
// std::from_chars), nesting, and truncated or malformed input: NeedMore while more text may
// come, Unsupported at the end of the input, and never a read past the span (every input lies
// in a block of exactly its size, for the sanitizer build to catch one).
#include <charconv>
#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "check.h"
#include "kineto/json_cursor.h"
#include "text_buffer.h"

namespace {

using check::TextBuffer;
using stallscope::kineto::Cursor;
using stallscope::kineto::NeedMore;
using stallscope::kineto::Unsupported;

// How a cursor operation ended: done, NeedMore, or Unsupported with its reason.
struct Outcome {
  enum { kDone, kNeedMore, kUnsupported } how;
  std::string why;
};

template <typename F>
Outcome outcome(F&& f) {
  try {
    f();
    return {Outcome::kDone, ""};
  } catch (const NeedMore&) {
    return {Outcome::kNeedMore, ""};
  } catch (const Unsupported& u) {
    return {Outcome::kUnsupported, u.why};
  }
}

// The decoded string at the start of `text` (final input), or the reason it was refused.
std::string decode(std::string_view text, std::string* why = nullptr) {
  TextBuffer b(text);
  Cursor c;
  c.reset(b.begin(), b.end(), true);
  std::string out;
  Outcome o = outcome([&] { out = std::string(c.str()); });
  if (why != nullptr) *why = o.why;
  return o.how == Outcome::kDone ? out : "<refused>";
}

std::string why_string(std::string_view text) {
  std::string why;
  decode(text, &why);
  return why;
}

// skip_value over `text`: its outcome and where the cursor stopped.
Outcome skip(std::string_view text, bool final, size_t* stopped = nullptr) {
  TextBuffer b(text);
  Cursor c;
  c.reset(b.begin(), b.end(), final);
  Outcome o = outcome([&] { c.skip_value(0); });
  if (stopped != nullptr) *stopped = static_cast<size_t>(c.pos() - b.begin());
  return o;
}

// The reference reading of an integer token: its value when it has at most 18 digits.
std::optional<int64_t> reference_int(std::string_view t) {
  size_t digits = t.size() - (t[0] == '-' ? 1 : 0);
  if (digits > 18 || t.find_first_of(".eE") != std::string_view::npos) return std::nullopt;
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), v);
  if (ec != std::errc() || ptr != t.data() + t.size()) return std::nullopt;
  return v;
}

struct IntRead {
  bool ok;
  int64_t value;
  bool is_int;
  std::string text;
  size_t end;  // the cursor's offset after the read
};

// integer() over `token` followed by `tail` (a short tail: the byte-wise reader; 32 bytes or
// more: the 8-bytes-a-step one).
IntRead read_int(std::string_view token, std::string_view tail) {
  std::string s(token);
  s += tail;
  TextBuffer b(s);
  Cursor c;
  c.reset(b.begin(), b.end(), true);
  IntRead r{false, 0, false, "", 0};
  std::string_view text;
  r.ok = c.integer(&r.value, &r.is_int, &text);
  r.text = std::string(text);
  r.end = static_cast<size_t>(c.pos() - b.begin());
  return r;
}

const std::string kPad(80, ' ');

}  // namespace

TEST(plain_string_is_a_view_into_the_input) {
  TextBuffer b("\"forward\", 1");
  Cursor c;
  c.reset(b.begin(), b.end(), true);
  std::string_view v = c.str();
  CHECK_EQ(v, "forward");
  CHECK(v.data() >= b.begin() && v.data() + v.size() <= b.end());
  CHECK_EQ(c.pos() - b.begin(), 9);
}

TEST(long_plain_strings_past_sixteen_bytes) {
  const std::string s(100, 'x');
  CHECK_EQ(decode("\"" + s + "\""), s);
  CHECK_EQ(decode("\"" + s + "\\n" + s + "\""), s + "\n" + s);
}

TEST(simple_escapes_are_decoded) {
  CHECK_EQ(decode(R"("a\"b\\c\/d\b\f\n\r\t")"), "a\"b\\c/d\b\f\n\r\t");
  CHECK_EQ(decode(R"("\\")"), "\\");
  CHECK_EQ(decode(R"("")"), "");
}

TEST(unicode_escapes_become_utf8) {
  CHECK_EQ(decode(R"("x\u0041y")"), "xAy");
  CHECK_EQ(decode(R"("\u00e9")"), "\xC3\xA9");
  CHECK_EQ(decode(R"("\u20AC")"), "\xE2\x82\xAC");
  CHECK_EQ(decode(R"("\ud83d\ude00")"), "\xF0\x9F\x98\x80");  // a surrogate pair
  CHECK_EQ(decode(R"("\u0000")"), std::string(1, '\0'));
  // Raw UTF-8 before and after an escape is kept as it is.
  CHECK_EQ(decode("\"\xC3\xA9\\t\xF0\x9F\x98\x80 0123456789abcdefghij\""),
           "\xC3\xA9\t\xF0\x9F\x98\x80 0123456789abcdefghij");
}

TEST(bad_escapes_and_surrogates_are_refused) {
  CHECK_EQ(why_string(R"("\x")"), "bad escape");
  CHECK_EQ(why_string(R"("\u12g4")"), "bad escape");
  CHECK_EQ(why_string(R"("\udc00")"), "lone surrogate");
  CHECK_EQ(why_string(R"("\ud83d")"), "lone surrogate");
  CHECK_EQ(why_string(R"("\ud83dx")"), "lone surrogate");
  CHECK_EQ(why_string(R"("\ud83d\u0041")"), "lone surrogate");
}

TEST(control_characters_and_invalid_utf8_are_refused) {
  CHECK_EQ(why_string("\"a\x01z\""), "control character in string");
  CHECK_EQ(why_string("\"a\\n\x1f\""), "control character in string");
  CHECK_EQ(why_string("\"\xC0\x80\""), "invalid UTF-8");      // overlong
  CHECK_EQ(why_string("\"\xED\xA0\x80\""), "invalid UTF-8");  // a surrogate's encoding
  CHECK_EQ(why_string("\"\xF5\x80\x80\x80\""), "invalid UTF-8");
  CHECK_EQ(why_string("\"\x80\""), "invalid UTF-8");  // a lone continuation byte
  CHECK_EQ(why_string("\"\xE2\x82\""), "invalid UTF-8");
  CHECK_EQ(why_string("\"\\t\xFF\""), "invalid UTF-8");
}

TEST(a_cut_string_needs_more_or_is_truncated_at_the_end) {
  const std::string s = R"("ab\u00e9\ud83d\ude00cd 0123456789abcdef")";
  for (size_t k = 0; k < s.size(); ++k) {
    TextBuffer b(std::string_view(s).substr(0, k));
    Cursor c;
    c.reset(b.begin(), b.end(), false);
    Outcome more = outcome([&] { c.str(); });
    CHECK_EQ(more.how, Outcome::kNeedMore);
    c.reset(b.begin(), b.end(), true);
    Outcome end = outcome([&] { c.str(); });
    CHECK_EQ(end.how, Outcome::kUnsupported);
    CHECK_EQ(end.why, "truncated JSON");
  }
  CHECK_EQ(decode(s),
           "ab\xC3\xA9\xF0\x9F\x98\x80"
           "cd 0123456789abcdef");
}

TEST(short_keys_are_read_in_one_step) {
  TextBuffer b("\"ts\": 1234567");
  Cursor c;
  c.reset(b.begin(), b.end(), true);
  CHECK_EQ(c.short_key(), "ts");
  CHECK_EQ(c.pos() - b.begin(), 4);
  // Not of the short form: an empty view and the cursor where it was.
  for (std::string_view s : {"\"abcdefg\": 1, 2", "\"a\\nb\": 1, 2, 3", "\"\": 1, 2, 3, 4",
                             "\"ts\": 1", "x\"ts\": 1, 2"}) {
    TextBuffer t(s);
    c.reset(t.begin(), t.end(), true);
    CHECK(c.short_key().empty());
    CHECK(c.pos() == t.begin());
  }
}

TEST(integers_of_every_length_and_sign) {
  const std::vector<std::string> tokens = {
      "0",
      "-0",
      "7",
      "-7",
      "12345678",
      "123456789",
      "1234567890123456",
      "-1234567890123456",
      "12345678901234567",
      "123456789012345678",
      "999999999999999999",
      "-999999999999999999",
      "1700000000000000",  // Kineto's ts: 16 digits of µs
  };
  for (const std::string& t : tokens) {
    for (std::string_view tail : {std::string_view(","), std::string_view(kPad)}) {
      IntRead r = read_int(t, tail);
      CHECK(r.ok);
      CHECK(r.is_int);
      CHECK_EQ(r.value, *reference_int(t));
      CHECK_EQ(r.text, t);
      CHECK_EQ(r.end, t.size());
    }
  }
}

TEST(integers_past_eighteen_digits_or_with_a_fraction_are_not_read_as_int64) {
  for (std::string_view tail : {std::string_view(","), std::string_view(kPad)}) {
    IntRead long19 = read_int("1234567890123456789", tail);
    CHECK(!long19.ok);
    CHECK(long19.is_int);
    CHECK_EQ(long19.text, "1234567890123456789");
    IntRead long23 = read_int("-12345678901234567890123", tail);
    CHECK(!long23.ok);
    CHECK(long23.is_int);
    for (std::string t : {"1.5", "1e5", "-2.5E-3", "1234567890123456.5", "0.5", "12E+2"}) {
      IntRead f = read_int(t, tail);
      CHECK(!f.ok);
      CHECK(!f.is_int);
      CHECK_EQ(f.text, t);
      CHECK_EQ(f.end, t.size());
    }
    IntRead lead = read_int("01", tail);  // the integer is "0": the caller finds '1' next
    CHECK(lead.ok);
    CHECK_EQ(lead.value, 0);
    CHECK_EQ(lead.end, 1u);
  }
}

// The 8-bytes-a-step reader (32 bytes or more left) and the byte-wise one agree on random
// integers of 1 to 22 digits, and with std::from_chars.
TEST(word_and_bytewise_integer_readers_agree) {
  std::mt19937_64 rng(12345);
  int checked = 0, bad = 0;
  for (int i = 0; i < 5000; ++i) {
    const int digits = 1 + static_cast<int>(rng() % 22);
    std::string t = rng() % 2 ? "-" : "";
    t += static_cast<char>('1' + rng() % 9);
    for (int d = 1; d < digits; ++d) t += static_cast<char>('0' + rng() % 10);
    if (rng() % 4 == 0) t += rng() % 2 ? ".25" : "e3";
    const IntRead a = read_int(t, ",");
    const IntRead b = read_int(t, kPad);
    const std::optional<int64_t> want = reference_int(t);
    bad += a.ok != b.ok || a.is_int != b.is_int || a.text != b.text || a.end != b.end;
    bad += a.ok != want.has_value() || (a.ok && (a.value != *want || b.value != *want));
    ++checked;
  }
  CHECK_EQ(bad, 0);
  CHECK_EQ(checked, 5000);
}

TEST(malformed_numbers_are_refused) {
  for (std::string t : {"-", "-a", "+1", ".5", "1.", "1.e5", "1e", "1e+", "--1", "-.5", "1ex"}) {
    TextBuffer b(t + ", ");
    Cursor c;
    c.reset(b.begin(), b.end(), true);
    bool is_int;
    Outcome o = outcome([&] { c.number(&is_int); });
    CHECK_EQ(o.how, Outcome::kUnsupported);
    CHECK_EQ(o.why, "malformed number");
  }
}

TEST(malformed_integers_are_refused_by_both_integer_readers) {
  for (std::string t : {"-", "-a", "+1", ".5", "-.5", "--1", "x"}) {
    for (std::string_view tail : {std::string_view(", "), std::string_view(kPad)}) {
      TextBuffer b(t + std::string(tail));
      Cursor c;
      c.reset(b.begin(), b.end(), true);
      int64_t v;
      bool is_int;
      std::string_view text;
      Outcome o = outcome([&] { c.integer(&v, &is_int, &text); });
      CHECK_EQ(o.how, Outcome::kUnsupported);
      CHECK_EQ(o.why, "malformed number");
    }
  }
}

TEST(a_number_at_the_end_of_the_span_needs_more) {
  // A number's end is only known at the byte after it.
  for (std::string_view t : {"123", "-4", "1.5", "2e10", "0"}) {
    TextBuffer b(t);
    Cursor c;
    bool is_int;
    c.reset(b.begin(), b.end(), false);
    CHECK_EQ(outcome([&] { c.number(&is_int); }).how, Outcome::kNeedMore);
    c.reset(b.begin(), b.end(), true);
    Outcome o = outcome([&] { c.number(&is_int); });
    CHECK_EQ(o.how, Outcome::kUnsupported);
    CHECK_EQ(o.why, "truncated JSON");
    int64_t v;
    std::string_view text;
    c.reset(b.begin(), b.end(), false);
    CHECK_EQ(outcome([&] { c.integer(&v, &is_int, &text); }).how, Outcome::kNeedMore);
  }
}

TEST(decimal_fast_reads_kineto_float_times_exactly) {
  auto fast = [](const std::string& t, double* d) {
    TextBuffer b(t + kPad);
    Cursor c;
    c.reset(b.begin(), b.end(), true);
    const bool ok = c.decimal_fast(d);
    return ok ? static_cast<long>(c.pos() - b.begin()) : -1L;
  };
  double d = 0;
  CHECK_EQ(fast("4458676522690.655", &d), 17L);
  CHECK_EQ(d, 4458676522690.655);
  CHECK_EQ(fast("-0.25", &d), 5L);
  CHECK_EQ(d, -0.25);
  CHECK_EQ(fast("0.1", &d), 3L);
  CHECK_EQ(d, 0.1);
  // Not its case (the caller reads these the general way): p stays put.
  for (std::string t :
       {"1e5", "12", "1.5e3", "12345678901234567890.5", "9007199254740993.0", "x", "-"}) {
    CHECK_EQ(fast(t, &d), -1L);
  }
  // Fewer than 64 bytes left: not read here either.
  TextBuffer near("1.5, ");
  Cursor c;
  c.reset(near.begin(), near.end(), true);
  CHECK(!c.decimal_fast(&d));
  CHECK(c.pos() == near.begin());
}

TEST(decimal_fast_matches_from_chars_on_random_decimals) {
  std::mt19937_64 rng(777);
  int bad = 0, read = 0;
  for (int i = 0; i < 5000; ++i) {
    const int ni = 1 + static_cast<int>(rng() % 16), nf = 1 + static_cast<int>(rng() % 4);
    std::string t = rng() % 3 == 0 ? "-" : "";
    t += static_cast<char>('1' + rng() % 9);
    for (int k = 1; k < ni; ++k) t += static_cast<char>('0' + rng() % 10);
    t += '.';
    for (int k = 0; k < nf; ++k) t += static_cast<char>('0' + rng() % 10);
    TextBuffer b(t + kPad);
    Cursor c;
    c.reset(b.begin(), b.end(), true);
    double got = 0, want = 0;
    std::from_chars(t.data(), t.data() + t.size(), want);
    if (c.decimal_fast(&got)) {
      ++read;
      bad += got != want || c.pos() != b.begin() + t.size();
    } else {
      bad += c.pos() != b.begin();
    }
  }
  CHECK_EQ(bad, 0);
  CHECK_GT(read, 2000);  // most are within its range (at most 2^53 as an integer)
}

// skip_number stops where number() does, near the span's end and far from it.
TEST(skip_number_ends_where_number_ends) {
  std::mt19937_64 rng(99);
  int bad = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string t = rng() % 2 ? "-" : "";
    const int ni = 1 + static_cast<int>(rng() % 30);
    t += rng() % 5 == 0 ? '0' : static_cast<char>('1' + rng() % 9);
    if (t.back() != '0') {
      for (int k = 1; k < ni; ++k) t += static_cast<char>('0' + rng() % 10);
    }
    if (rng() % 2) {
      t += '.';
      const int nf = 1 + static_cast<int>(rng() % 30);
      for (int k = 0; k < nf; ++k) t += static_cast<char>('0' + rng() % 10);
    }
    if (rng() % 4 == 0) t += rng() % 2 ? "e-7" : "E+12";
    for (std::string_view tail : {std::string_view(","), std::string_view(kPad)}) {
      const std::string s = t + std::string(tail);
      TextBuffer b(s);
      Cursor skip, read;
      skip.reset(b.begin(), b.end(), true);
      read.reset(b.begin(), b.end(), true);
      bool is_int;
      skip.skip_number();
      read.number(&is_int);
      bad += skip.pos() != read.pos() || read.pos() != b.begin() + t.size();
    }
  }
  CHECK_EQ(bad, 0);
}

TEST(nested_values_are_skipped_whole) {
  const std::string doc =
      R"({"a": [1, -2.5e3, "x\"y", {"b": null, "c": [true, false, []]}, {}], "d": {"e": "\u00e9"},)"
      R"( "f": [[[0.5]], "plain", -0, 12345678901234567890]})";
  size_t stopped = 0;
  Outcome o = skip(doc + " ,", true, &stopped);
  CHECK_EQ(o.how, Outcome::kDone);
  CHECK_EQ(stopped, doc.size());
  for (std::string_view v : {"true", "false", "null", "\"s\"", "[]", "{}"}) {
    o = skip(std::string(v) + ",", true, &stopped);
    CHECK_EQ(o.how, Outcome::kDone);
    CHECK_EQ(stopped, v.size());
  }
}

TEST(nesting_is_bounded) {
  auto nested = [](int depth, char open, char close) {
    std::string s;
    for (int i = 0; i < depth; ++i)
      s += open == '{' ? std::string("{\"k\":") : std::string(1, open);
    s += "0";
    for (int i = 0; i < depth; ++i) s += close;
    return s;
  };
  CHECK_EQ(skip(nested(400, '[', ']'), true).how, Outcome::kDone);
  CHECK_EQ(skip(nested(400, '{', '}'), true).how, Outcome::kDone);
  Outcome deep = skip(nested(600, '[', ']'), true);
  CHECK_EQ(deep.how, Outcome::kUnsupported);
  CHECK_EQ(deep.why, "nesting too deep");
  deep = skip(nested(600, '{', '}'), true);
  CHECK_EQ(deep.why, "nesting too deep");
}

TEST(malformed_values_are_refused_with_a_reason) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"a" 1})", "malformed JSON"}, {R"({"a":1,})", "malformed JSON"},
      {"[1 2]", "malformed JSON"},      {"[1,]", "malformed number"},
      {"{1:2}", "malformed JSON"},      {"trux,", "malformed JSON"},
      {"nul,", "malformed JSON"},       {"]", "malformed number"},
      {R"({"a":1;)", "malformed JSON"}, {R"(["a" "b"])", "malformed JSON"},
  };
  for (const auto& [text, why] : cases) {
    Outcome o = skip(text, true);
    CHECK_EQ(o.how, Outcome::kUnsupported);
    CHECK_EQ(o.why, why);
  }
}

// Every cut of a valid document: NeedMore while more may come, "truncated JSON" at the end.
TEST(every_prefix_needs_more_or_is_truncated) {
  const std::vector<std::string> docs = {
      R"({"name": "aten::mm", "args": {"Input Dims": [[1024, 1024], [1024, 1024]], "ts": 1700000000000000, "dur": 12.345}})",
      R"([1.5e-300, -0, 0.000001, 12345678901234567890123456789, "\ud83d\ude00\n", {"": {}}, null, true])",
      "[" + std::string(100, ' ') + "\"" + std::string(70, 'q') + "\"" + std::string(50, '\n') +
          "]",
  };
  for (const std::string& d : docs) {
    REQUIRE(skip(d, true).how == Outcome::kDone);
    int bad = 0;
    for (size_t k = 0; k < d.size(); ++k) {
      const std::string_view cut = std::string_view(d).substr(0, k);
      bad += skip(cut, false).how != Outcome::kNeedMore;
      Outcome end = skip(cut, true);
      bad += end.how != Outcome::kUnsupported || end.why != "truncated JSON";
    }
    CHECK_EQ(bad, 0);
  }
}

// Every one-byte change of a document ends in a reading or a reason, within the span.
TEST(every_single_byte_change_is_read_or_refused) {
  const std::string doc =
      R"({"ph": "X", "cat": "kernel", "name": "gemm\u00e9", "ts": 4458676522690.655, "dur": 1234,)"
      R"( "args": {"grid": [128, 1, 1], "stream": 7, "x": -1.5e-3, "ok": true, "n": null}})";
  const std::string bytes = std::string("\"\\{}[],:0-e.+ nt\x01\xC3\xFF") + '\0';
  int ends = 0, bad = 0;
  for (size_t i = 0; i < doc.size(); ++i) {
    for (char b : bytes) {
      std::string m = doc;
      m[i] = b;
      size_t stopped = 0;
      Outcome o = skip(m, true, &stopped);
      bad += o.how == Outcome::kNeedMore || stopped > m.size();
      ends += o.how == Outcome::kDone;
    }
  }
  CHECK_EQ(bad, 0);
  CHECK_GT(ends, 0);
}

TEST(literals_and_null) {
  TextBuffer b("null, nul");
  Cursor c;
  c.reset(b.begin(), b.end(), true);
  CHECK(c.null_here());
  c.expect(',');
  c.ws();
  Outcome o = outcome([&] { c.null_here(); });
  CHECK_EQ(o.how, Outcome::kUnsupported);
  CHECK_EQ(o.why, "truncated JSON");
  TextBuffer x("\"s\"");
  c.reset(x.begin(), x.end(), true);
  CHECK(!c.null_here());
  CHECK(c.pos() == x.begin());
}

TEST(whitespace_runs_of_any_length_are_skipped) {
  for (size_t n : {0, 1, 15, 16, 17, 40, 100}) {
    std::string s;
    for (size_t i = 0; i < n; ++i) s += " \n\r\t"[i % 4];
    s += "x";
    TextBuffer b(s);
    Cursor c;
    c.reset(b.begin(), b.end(), true);
    c.ws();
    CHECK_EQ(c.pos() - b.begin(), static_cast<long>(n));
  }
  TextBuffer blank("   ");
  Cursor c;
  c.reset(blank.begin(), blank.end(), true);
  c.ws();
  CHECK(c.at_end());
}
