// HTA's rank rule for traces whose distributedInfo has no rank: the first `"rank":` followed by
// one or more spaces or tabs and then digits, anywhere in the text. Found over a stream of chunks
// without keeping the text: a candidate cut by a chunk's end is carried into the next chunk.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>  // memmem (GNU)
#include <string>
#include <string_view>

namespace stallscope::kineto {

class RankSearch {
 public:
  void reset() {
    carry_.clear();
    found_ = false;
    rank_ = -1;
  }
  bool found() const { return found_; }
  // The rank (digits beyond int64 saturate at -1: the caller treats it as out of range).
  int64_t rank() const { return rank_; }

  void feed(std::string_view chunk) {
    if (found_) return;
    if (carry_.empty()) {
      search(chunk, true);
      return;
    }
    // Rare: a chunk ended inside a candidate (or a prefix of the key).
    std::string joined = carry_;
    joined.append(chunk);
    carry_.clear();
    search(joined, true);
  }

  // End of input: a carried candidate ending with digits is a match.
  void finish() {
    if (found_ || carry_.empty()) return;
    std::string rest;
    rest.swap(carry_);
    search(rest, false);
  }

 private:
  static constexpr std::string_view kKey = "\"rank\":";
  static constexpr size_t kMaxCarry = 64;
  std::string carry_;
  bool found_ = false;
  int64_t rank_ = -1;

  // Looks for the first match in `text`. When `more` and a candidate reaches the end of text,
  // keeps the candidate in carry_ and returns.
  void search(std::string_view text, bool more) {
    size_t at = 0;
    for (;;) {
      const void* hit = at < text.size()
                            ? memmem(text.data() + at, text.size() - at, kKey.data(), kKey.size())
                            : nullptr;
      if (hit == nullptr) {
        // A prefix of the key may end the text.
        if (more) {
          size_t keep = text.size() < kKey.size() - 1 ? text.size() : kKey.size() - 1;
          for (size_t n = keep; n > 0; --n) {
            if (text.substr(text.size() - n) == kKey.substr(0, n)) {
              carry_ = std::string(text.substr(text.size() - n));
              break;
            }
          }
        }
        return;
      }
      size_t k = static_cast<size_t>(static_cast<const char*>(hit) - text.data());
      size_t i = k + kKey.size();
      size_t blanks = i;
      while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
      size_t first_digit = i;
      while (i < text.size() && text[i] >= '0' && text[i] <= '9') ++i;
      if (i == text.size() && more) {  // the candidate may go on in the next chunk
        carry_ = std::string(text.substr(k));
        return;
      }
      if (first_digit > blanks && i > first_digit) {
        found_ = true;
        rank_ = parse(text.substr(first_digit, i - first_digit));
        return;
      }
      at = k + 1;
    }
  }

  static int64_t parse(std::string_view digits) {
    if (digits.size() > 18) return -1;
    int64_t v = 0;
    for (char c : digits) v = v * 10 + (c - '0');
    return v;
  }
};

}  // namespace stallscope::kineto
