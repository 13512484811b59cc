// Kineto traces made up for the scanner's tests, with the columns the scanner must read from
// them: events of random key order, layout and content (escapes, unknown keys with nested
// values, strings that look like event boundaries, numbers as strings, nulls), and the scanner's
// result decoded into plain values (strings instead of codes) for comparison.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kineto/stream_scanner.h"

namespace synthetic {

using stallscope::kineto::FileResult;
using stallscope::kineto::kNull;
using stallscope::kineto::StreamScanner;
namespace k = stallscope::kineto;

// A scanner result with every code replaced by its string ("<null>" for none).
struct Decoded {
  bool ok = false;
  std::string reason;
  std::array<std::vector<int64_t>, k::kNumRowInt> rows;
  std::array<std::vector<std::string>, k::kNumRowStr> strs;
  std::array<std::vector<int64_t>, k::kNumNcclInt> nccl;
  std::array<std::vector<std::string>, k::kNumNcclStr> nccl_strs;
  std::array<std::vector<int64_t>, k::kNumFlowInt> flows;
  std::vector<std::string> flow_cat;
  std::array<int64_t, k::kNumProblems> problems{};
  int64_t events = 0;
  bool ts_float = false;
  std::string meta_json;
  bool rank_found = false;
  int64_t rank = -1;
  bool operator==(const Decoded&) const = default;
};

inline std::string str_of(const k::Dict& d, int32_t code) {
  return code < 0 ? std::string("<null>") : d.strings()[static_cast<size_t>(code)];
}

inline Decoded decode(const FileResult& r, const StreamScanner& s) {
  Decoded d;
  d.ok = true;
  for (int c = 0; c < k::kNumRowInt; ++c) d.rows[c] = r.rows[c];
  const k::Dict* row_dicts[] = {&s.cats(), &s.names(), &s.args()};
  for (int c = 0; c < k::kNumRowStr; ++c) {
    for (int32_t code : r.strs[c]) d.strs[c].push_back(str_of(*row_dicts[c], code));
  }
  for (int c = 0; c < k::kNumNcclInt; ++c) d.nccl[c] = r.nccl[c];
  for (int c = 0; c < k::kNumNcclStr; ++c) {
    for (int32_t code : r.nccl_strs[c]) d.nccl_strs[c].push_back(str_of(s.args(), code));
  }
  for (int c = 0; c < k::kNumFlowInt; ++c) d.flows[c] = r.flows[c];
  for (int32_t code : r.flow_cat) d.flow_cat.push_back(str_of(s.cats(), code));
  for (int c = 0; c < k::kNumProblems; ++c) d.problems[c] = r.problems[c];
  d.events = r.events;
  d.ts_float = r.ts_float;
  d.meta_json = r.meta_json;
  d.rank_found = r.rank_found;
  d.rank = r.rank;
  return d;
}

// Feeds `text` to `s` as one file, cut at `cuts` (offsets, ascending), each piece copied into a
// block of exactly its size (feed() reads the caller's bytes in place).
inline Decoded scan(StreamScanner& s, std::string_view text, const std::vector<size_t>& cuts) {
  s.begin_file(text.size());
  size_t at = 0;
  bool going = true;
  auto piece = [&](size_t end) {
    if (!going || end <= at) return;
    const size_t n = end - at;
    std::unique_ptr<char[]> block(new char[n]);
    std::copy(text.begin() + static_cast<ptrdiff_t>(at), text.begin() + static_cast<ptrdiff_t>(end),
              block.get());
    going = s.feed(std::string_view(block.get(), n));
    at = end;
  };
  for (size_t c : cuts) piece(std::min(c, text.size()));
  piece(text.size());
  FileResult r;
  Decoded d;
  if (s.end_file(&r)) {
    d = decode(r, s);
  } else {
    d.reason = s.reason();
  }
  return d;
}

// Cuts every `step` bytes.
inline std::vector<size_t> every(size_t step, size_t size) {
  std::vector<size_t> cuts;
  for (size_t c = step; c < size; c += step) cuts.push_back(c);
  return cuts;
}

// One string value: its JSON text and the value it decodes to.
struct Str {
  std::string json, value;
};

inline Str plain(std::string v) { return {"\"" + v + "\"", v}; }

struct Trace {
  std::string text;
  Decoded want;  // what the scanner must read from it
};

// A trace of n events. pretty: Kineto's own layout (a newline and indent before each key);
// otherwise each event picks its layout (compact, spaced, or Kineto's).
inline Trace make_trace(uint64_t seed, int n, bool pretty) {
  std::mt19937_64 rng(seed);
  auto pick = [&](size_t n_choices) { return static_cast<size_t>(rng() % n_choices); };
  const std::vector<Str> cats = {plain("kernel"),
                                 plain("cpu_op"),
                                 plain("cuda_runtime"),
                                 plain("gpu_memcpy"),
                                 plain("user_annotation"),
                                 {R"("we\"ird\\cat")", "we\"ird\\cat"},
                                 {R"("caf\u00e9")", "caf\xC3\xA9"}};
  const std::vector<Str> names = {plain("aten::mm"),
                                  plain("ProfilerStep#3"),
                                  plain("void at::native::vectorized_elementwise_kernel<4>"),
                                  {R"("a\nb")", "a\nb"},
                                  {R"("}, {\"ph\": \"X\"}, {")", "}, {\"ph\": \"X\"}, {"},
                                  plain(std::string(70, 'n'))};
  const std::vector<std::string> unknown = {R"([1, 2, 3])",
                                            R"({"a": [1, {"b": null}], "c": "}, {"})",
                                            R"("x, {\"y\": 1}")",
                                            R"(-1.5e-7)",
                                            R"(true)",
                                            R"([[1024, 1024], [1024]])",
                                            R"(null)"};

  Trace t;
  Decoded& w = t.want;
  w.ok = true;
  std::string& out = t.text;
  out =
      "{\n  \"schemaVersion\": 1,\n  \"distributedInfo\": {\"backend\": \"nccl\", \"rank\": 5},\n";
  out += "  \"traceEvents\": [";
  int64_t ts = 1700000000000000;  // µs: Kineto's 16 digits
  for (int i = 0; i < n; ++i) {
    const int style = pretty ? 2 : static_cast<int>(pick(3));
    const std::string open = style == 2 ? "\n    " : style == 1 ? " " : "";
    const std::string sep = style == 2 ? ",\n    " : style == 1 ? ", " : ",";
    const std::string colon = style == 0 ? ":" : ": ";
    std::vector<std::pair<std::string, std::string>> kv;  // key, value text
    auto put = [&](const std::string& key, const std::string& value) {
      kv.emplace_back(key, value);
    };
    const size_t kind = pick(10);  // 0-6: a complete event, 7-8: a flow, 9: an instant
    ts += static_cast<int64_t>(pick(50));
    const int64_t pid = static_cast<int64_t>(pick(3)), tid = static_cast<int64_t>(pick(5)) + 1;
    // pid as a number or as a numeric string ("7" reads as 7).
    const std::string pid_text =
        pick(5) == 0 ? "\"" + std::to_string(pid) + "\"" : std::to_string(pid);
    if (kind <= 6) {
      const Str& cat = cats[pick(cats.size())];
      const Str& name = names[pick(names.size())];
      const int64_t dur = static_cast<int64_t>(pick(1000));
      put("ph", "\"X\"");
      put("cat", cat.json);
      put("name", name.json);
      put("pid", pid_text);
      put("tid", std::to_string(tid));
      put("ts", std::to_string(ts));
      put("dur", std::to_string(dur));
      int64_t corr = kNull, stream = kNull, ext = kNull, device = kNull, bytes = kNull;
      std::string sync = "<null>";
      if (pick(10) < 7) {
        std::vector<std::pair<std::string, std::string>> args;
        if (pick(2)) args.emplace_back("correlation", std::to_string(corr = 1000 + i));
        if (pick(2)) args.emplace_back("stream", std::to_string(stream = 7));
        if (pick(4) == 0) args.emplace_back("stream", "null");  // replaces: one key only
        if (pick(3) == 0) args.emplace_back("External id", std::to_string(ext = -5 - i));
        if (pick(3) == 0) args.emplace_back("device", std::to_string(device = 0));
        if (pick(4) == 0) args.emplace_back("bytes", std::to_string(bytes = 1 << 20));
        if (pick(5) == 0) {
          sync = "event_sync";
          args.emplace_back("cuda_sync_kind", "\"event_sync\"");
        }
        for (size_t u = pick(3); u > 0; --u) {
          args.emplace_back("note" + std::to_string(u), unknown[pick(unknown.size())]);
        }
        // One key of each name: a later "stream" replaces the earlier one.
        std::vector<std::pair<std::string, std::string>> once;
        for (auto& a : args) {
          auto it =
              std::find_if(once.begin(), once.end(), [&](auto& o) { return o.first == a.first; });
          if (it == once.end()) {
            once.push_back(a);
          } else {
            it->second = a.second;
          }
        }
        for (auto& a : once) {
          if (a.first == "stream" && a.second == "null") stream = kNull;
        }
        std::shuffle(once.begin(), once.end(), rng);
        std::string text = "{";
        for (size_t j = 0; j < once.size(); ++j) {
          text += (j ? sep : std::string()) + "\"" + once[j].first + "\"" + colon + once[j].second;
        }
        put("args", text + "}");
      }
      if (pick(4) == 0) put("unknown_key", unknown[pick(unknown.size())]);
      std::shuffle(kv.begin(), kv.end(), rng);
      const int64_t row_ints[] = {i,    ts * 1000, dur * 1000, pid,    tid,
                                  corr, stream,    ext,        device, bytes};
      for (int c = 0; c < k::kNumRowInt; ++c) w.rows[c].push_back(row_ints[c]);
      w.strs[k::kRowCat].push_back(cat.value);
      w.strs[k::kRowName].push_back(name.value);
      w.strs[k::kRowSyncKind].push_back(sync);
    } else if (kind <= 8) {
      put("ph", kind == 7 ? "\"s\"" : "\"f\"");
      put("cat", "\"ac2g\"");
      put("name", "\"ac2g\"");
      put("id", std::to_string(1000 + i));
      put("pid", pid_text);
      put("tid", std::to_string(tid));
      put("ts", std::to_string(ts));
      if (kind == 8) put("bp", "\"e\"");
      std::shuffle(kv.begin(), kv.end(), rng);
      w.flows[k::kFlowPid].push_back(pid);
      w.flows[k::kFlowTid].push_back(tid);
      w.flows[k::kFlowTs].push_back(ts * 1000);
      w.flows[k::kFlowId].push_back(1000 + i);
      w.flow_cat.push_back("ac2g");
    } else {
      put("ph", "\"i\"");
      put("name", names[pick(names.size())].json);
      put("s", "\"t\"");
      put("ts", std::to_string(ts));
      std::shuffle(kv.begin(), kv.end(), rng);
    }
    out += i == 0 ? "\n  " : ",\n  ";
    out += "{" + open;
    for (size_t j = 0; j < kv.size(); ++j) {
      out += (j ? sep : std::string()) + "\"" + kv[j].first + "\"" + colon + kv[j].second;
    }
    out += style == 2 ? "\n  }" : "}";
  }
  out += "\n  ],\n  \"baseTimeNanoseconds\": 1700000000000000000\n}\n";
  w.events = n;
  w.meta_json =
      "{\"traceEvents\":[],\"schemaVersion\": 1,\"distributedInfo\": {\"backend\": \"nccl\", "
      "\"rank\": 5},\"baseTimeNanoseconds\": 1700000000000000000}";
  w.rank_found = true;
  w.rank = 5;
  return t;
}

}  // namespace synthetic
