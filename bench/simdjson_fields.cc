// The fastest general JSON parser on the importer's job, for bench/kineto_vs_simdjson.py: parse
// a Kineto trace's text with simdjson (its CPU-tailored kernel, chosen at run time) and read the
// fields stallscope's scanner keeps from every event. Not part of the package: built by the
// bench with g++ against the system's simdjson (Debian: libsimdjson-dev).
//
//   simdjson_fields TEXT.json RUNS   ->  one JSON line: implementation, bytes, and per run the
//                                        seconds of each way (dom, dom_fields, ondemand_fields)
//
// dom: a full parse (every byte's grammar checked, as the scanner must: a malformed file goes to
// stallscope's general reader), no field read. dom_fields: the same, then ph, cat, name, pid,
// tid, ts, dur and args' External id, correlation, stream, device and bytes of each event.
// ondemand_fields: simdjson's lazy API reading those fields; it checks the grammar of what it
// reads and the structure of the rest, not every value it skips.
#include <simdjson.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

constexpr const char* kArgs[] = {"External id", "correlation", "stream", "device", "bytes"};

// The kept fields' values folded into one number, so that no read is optimised away.
int64_t dom_fields(simdjson::dom::element doc) {
  int64_t sink = 0;
  for (simdjson::dom::element ev : doc["traceEvents"].get_array()) {
    simdjson::dom::object o;
    if (ev.get(o) != simdjson::SUCCESS) continue;
    std::string_view s;
    for (const char* k : {"ph", "cat", "name"}) {
      if (o[k].get(s) == simdjson::SUCCESS) sink += static_cast<int64_t>(s.size());
    }
    int64_t v;
    double d;
    for (const char* k : {"pid", "tid"}) {
      if (o[k].get(v) == simdjson::SUCCESS) sink += v;
    }
    for (const char* k : {"ts", "dur"}) {
      if (o[k].get(d) == simdjson::SUCCESS) sink += static_cast<int64_t>(d);
    }
    simdjson::dom::object args;
    if (o["args"].get(args) == simdjson::SUCCESS) {
      for (const char* k : kArgs) {
        if (args[k].get(v) == simdjson::SUCCESS) sink += v;
      }
    }
  }
  return sink;
}

int64_t ondemand_fields(simdjson::ondemand::parser& parser, const simdjson::padded_string& text) {
  int64_t sink = 0;
  simdjson::ondemand::document doc = parser.iterate(text);
  for (simdjson::ondemand::object o : doc["traceEvents"].get_array()) {
    for (auto field : o) {
      std::string_view key = field.unescaped_key();
      if (key == "ph" || key == "cat" || key == "name") {
        std::string_view s;
        if (field.value().get(s) == simdjson::SUCCESS) sink += static_cast<int64_t>(s.size());
      } else if (key == "pid" || key == "tid") {
        int64_t v;
        if (field.value().get(v) == simdjson::SUCCESS) sink += v;
      } else if (key == "ts" || key == "dur") {
        double d;
        if (field.value().get(d) == simdjson::SUCCESS) sink += static_cast<int64_t>(d);
      } else if (key == "args") {
        simdjson::ondemand::object args;
        if (field.value().get(args) != simdjson::SUCCESS) continue;
        for (auto af : args) {
          std::string_view k = af.unescaped_key();
          for (const char* want : kArgs) {
            if (k == want) {
              int64_t v;
              if (af.value().get(v) == simdjson::SUCCESS) sink += v;
              break;
            }
          }
        }
      }
    }
  }
  return sink;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s TEXT.json RUNS\n", argv[0]);
    return 2;
  }
  simdjson::padded_string text;
  if (simdjson::padded_string::load(argv[1]).get(text) != simdjson::SUCCESS) {
    std::fprintf(stderr, "cannot read %s\n", argv[1]);
    return 2;
  }
  const int runs = std::atoi(argv[2]);
  simdjson::dom::parser dom;
  simdjson::ondemand::parser lazy;
  std::vector<double> t_dom, t_fields, t_lazy;
  int64_t sink = 0;
  for (int i = 0; i < runs; ++i) {
    double a = now_s();
    simdjson::dom::element doc;
    if (dom.parse(text).get(doc) != simdjson::SUCCESS) {
      std::fprintf(stderr, "simdjson: %s is not valid JSON\n", argv[1]);
      return 1;
    }
    double b = now_s();
    sink += dom_fields(doc);
    double c = now_s();
    sink += ondemand_fields(lazy, text);
    double d = now_s();
    t_dom.push_back(b - a);
    t_fields.push_back(c - a);
    t_lazy.push_back(d - c);
  }
  auto list = [](const std::vector<double>& v) {
    std::string s = "[";
    for (size_t i = 0; i < v.size(); ++i) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%s%.6f", i ? ", " : "", v[i]);
      s += buf;
    }
    return s + "]";
  };
  std::printf(
      "{\"implementation\": \"%s\", \"bytes\": %zu, \"sink\": %lld, \"dom\": %s, "
      "\"dom_fields\": %s, \"ondemand_fields\": %s}\n",
      simdjson::get_active_implementation()->name().c_str(), text.size(),
      static_cast<long long>(sink), list(t_dom).c_str(), list(t_fields).c_str(),
      list(t_lazy).c_str());
  return 0;
}
