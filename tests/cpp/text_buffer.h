// Test input in a heap block of exactly its size, so that a read past its end is a sanitizer
// report rather than a read of whatever follows (a std::string keeps a terminating NUL and
// often spare capacity after its bytes).
#pragma once

#include <cstddef>
#include <cstring>
#include <memory>
#include <string_view>

namespace check {

class TextBuffer {
 public:
  explicit TextBuffer(std::string_view s) : n_(s.size()), p_(new char[s.size()]) {
    if (n_ > 0) std::memcpy(p_.get(), s.data(), n_);
  }
  const char* begin() const { return p_.get(); }
  const char* end() const { return p_.get() + n_; }
  size_t size() const { return n_; }
  std::string_view view() const { return {p_.get(), n_}; }

 private:
  size_t n_;
  std::unique_ptr<char[]> p_;
};

}  // namespace check
