#include "arrow/column_export.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <stdexcept>
#include <utility>

namespace stallscope::arrow {

namespace {

constexpr size_t kAlign = 64;                 // bytes, Arrow's recommended buffer alignment
constexpr size_t kInline = 12;                // a view holds strings up to this many bytes
constexpr size_t kMaxBlob = size_t{1} << 30;  // bytes per view data buffer (offsets are int32)

Buffer bitmap_from_bytes(const uint8_t* flags, size_t n, int64_t* nulls) {
  Buffer out((n + 7) / 8);
  std::memset(out.data(), 0, out.size());
  int64_t zero = 0;
  for (size_t i = 0; i < n; ++i) {
    if (flags[i]) {
      out.data()[i >> 3] |= static_cast<uint8_t>(1u << (i & 7));
    } else {
      ++zero;
    }
  }
  if (nulls != nullptr) *nulls = zero;
  return out;
}

// The 16-byte view of `s`, stored in blob `blob` at `offset` when it does not fit inline.
void make_view(uint8_t* view, std::string_view s, int32_t blob, int32_t offset) {
  std::memset(view, 0, 16);
  const auto len = static_cast<int32_t>(s.size());
  std::memcpy(view, &len, 4);
  if (s.size() <= kInline) {
    std::memcpy(view + 4, s.data(), s.size());
  } else {
    std::memcpy(view + 4, s.data(), 4);  // prefix
    std::memcpy(view + 8, &blob, 4);
    std::memcpy(view + 12, &offset, 4);
  }
}

// Ends a row written in place at `open` in `blob` (n of its bytes kept): its view made, and
// the blob trimmed to the row's end, or to its start for a row short enough to live in the
// view alone.
void close_row(uint8_t* view, std::string* blob, int32_t index, size_t open, size_t n) {
  if (open + n > blob->size()) throw std::logic_error("ViewBuilder: a row past its space");
  make_view(view, std::string_view(blob->data() + open, n), index, static_cast<int32_t>(open));
  blob->resize(n > kInline ? open + n : open);
}

struct SchemaPrivate {
  std::shared_ptr<const Column> col;
  ArrowSchema dictionary{};  // a dictionary column's (unless the consumer moved it out)
};

struct ArrayPrivate {
  std::shared_ptr<const Column> col;
  std::vector<const void*> buffers;
  std::vector<int64_t> blob_sizes;  // "vu": the last buffer
  ArrowArray dictionary{};
};

void release_schema(ArrowSchema* s) {
  auto* priv = static_cast<SchemaPrivate*>(s->private_data);
  if (priv->dictionary.release != nullptr) priv->dictionary.release(&priv->dictionary);
  delete priv;
  s->release = nullptr;
}

void release_array(ArrowArray* a) {
  auto* priv = static_cast<ArrayPrivate*>(a->private_data);
  if (priv->dictionary.release != nullptr) priv->dictionary.release(&priv->dictionary);
  delete priv;
  a->release = nullptr;
}

void put_i32(std::string* out, size_t v) {
  const auto x = static_cast<int32_t>(v);
  out->append(reinterpret_cast<const char*>(&x), 4);  // native byte order, as Arrow says
}

}  // namespace

Buffer::Buffer(size_t bytes) : size_(bytes) {
  const size_t rounded = (bytes + kAlign - 1) / kAlign * kAlign;
  data_ = static_cast<uint8_t*>(std::aligned_alloc(kAlign, rounded == 0 ? kAlign : rounded));
  if (data_ == nullptr) throw std::bad_alloc();
}

Buffer::Buffer(Buffer&& o) noexcept : data_(o.data_), size_(o.size_) {
  o.data_ = nullptr;
  o.size_ = 0;
}

Buffer& Buffer::operator=(Buffer&& o) noexcept {
  if (this != &o) {
    std::free(data_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

Buffer::~Buffer() { std::free(data_); }

std::string numeric_format(char kind, size_t itemsize) {
  switch (kind) {
    case 'b':
      return itemsize == 1 ? "b" : "";
    case 'i':
      return itemsize == 1   ? "c"
             : itemsize == 2 ? "s"
             : itemsize == 4 ? "i"
             : itemsize == 8 ? "l"
                             : "";
    case 'u':
      return itemsize == 1   ? "C"
             : itemsize == 2 ? "S"
             : itemsize == 4 ? "I"
             : itemsize == 8 ? "L"
                             : "";
    case 'f':
      return itemsize == 4 ? "f" : itemsize == 8 ? "g" : "";
    default:
      return "";
  }
}

std::shared_ptr<const Column> numeric(const std::string& format, const void* data, size_t n,
                                      size_t itemsize) {
  auto col = std::make_shared<Column>();
  col->format = format;
  col->length = static_cast<int64_t>(n);
  if (format == "b") {
    col->values = bitmap_from_bytes(static_cast<const uint8_t*>(data), n, nullptr);
  } else {
    col->values = Buffer(n * itemsize);
    if (n != 0) std::memcpy(col->values.data(), data, n * itemsize);
  }
  return col;
}

std::shared_ptr<const Column> numeric_shared(const std::string& format, const SharedBuffer& buf,
                                             const void* data, size_t n) {
  auto col = std::make_shared<Column>();
  col->format = format;
  col->length = static_cast<int64_t>(n);
  col->shared_owner = buf.owner;
  col->shared_values = data;
  return col;
}

ViewBuilder::ViewBuilder(size_t rows, size_t data_hint) : views_(rows * 16) {
  data_.emplace_back().reserve(std::min(data_hint, kMaxBlob));
}

uint8_t* ViewBuilder::next_view() {
  if ((rows_ + 1) * 16 > views_.size()) throw std::logic_error("ViewBuilder: more rows than sized");
  return views_.data() + 16 * rows_++;
}

char* ViewBuilder::row_space(size_t max) {
  if (max > kMaxBlob) throw std::length_error("string column: a value over 1 GiB");
  std::string* blob = &data_.back();
  if (blob->size() + max > kMaxBlob) blob = &data_.emplace_back();
  open_ = blob->size();
  blob->resize(open_ + max);  // within the reserved data_hint: no reallocation
  return blob->data() + open_;
}

void ViewBuilder::end_row_at(size_t n) {
  // Checked before a view is taken, so a refused row leaves the row count as it was.
  if (open_ + n > data_.back().size()) throw std::logic_error("ViewBuilder: a row past its space");
  close_row(next_view(), &data_.back(), static_cast<int32_t>(data_.size() - 1), open_, n);
}

ViewBuilder::ViewBuilder(const std::vector<size_t>& starts, const std::vector<size_t>& bytes)
    : views_((starts.empty() ? 0 : starts.back()) * 16),
      rows_(starts.empty() ? 0 : starts.back()),
      part_starts_(starts) {
  if (starts.empty() || starts.size() != bytes.size() + 1 || starts.front() != 0 ||
      !std::is_sorted(starts.begin(), starts.end())) {
    throw std::invalid_argument("ViewBuilder: parts' starts and sizes do not match");
  }
  data_.resize(bytes.size());
  for (size_t k = 0; k < bytes.size(); ++k) {
    if (bytes[k] > kMaxBlob) throw std::length_error("string column: a part over 1 GiB");
    data_[k].reserve(bytes[k]);
  }
}

ViewBuilder::Part ViewBuilder::part(size_t k) {
  if (k + 1 >= part_starts_.size()) throw std::logic_error("ViewBuilder: no such part");
  return Part(views_.data() + 16 * part_starts_[k], views_.data() + 16 * part_starts_[k + 1],
              &data_[k], static_cast<int32_t>(k));
}

char* ViewBuilder::Part::row_space(size_t max) {
  if (blob_->size() + max > blob_->capacity()) {
    throw std::logic_error("ViewBuilder: a part's rows past its bytes");
  }
  open_ = blob_->size();
  blob_->resize(open_ + max);  // within the part's reservation: no reallocation
  return blob_->data() + open_;
}

void ViewBuilder::Part::end_row_at(size_t n) {
  if (view_ == end_) throw std::logic_error("ViewBuilder: more rows than the part holds");
  close_row(view_, blob_, index_, open_, n);
  view_ += 16;
}

std::shared_ptr<const Column> ViewBuilder::finish(std::string name) {
  auto col = std::make_shared<Column>();
  col->format = "vu";
  col->name = std::move(name);
  col->length = static_cast<int64_t>(rows_);
  col->values = std::move(views_);  // rows_ views (fewer than sized: the rest is never read)
  col->blobs = std::move(data_);    // no nulls: no validity bitmap
  views_ = Buffer();
  rows_ = 0;
  data_.assign(1, std::string());
  part_starts_.clear();
  return col;
}

namespace {

template <typename Code>
std::shared_ptr<const Column> gather_strings_of(const std::vector<std::string>& table,
                                                const Code* codes, size_t n, std::string name) {
  auto col = std::make_shared<Column>();
  col->format = "vu";
  col->name = std::move(name);
  col->length = static_cast<int64_t>(n);
  // Each table string's view, its long strings stored once.
  std::vector<uint8_t> views(table.size() * 16);
  col->blobs.emplace_back();
  for (size_t i = 0; i < table.size(); ++i) {
    const std::string& s = table[i];
    if (s.size() > kMaxBlob) throw std::length_error("string column: a value over 1 GiB");
    if (s.size() > kInline && col->blobs.back().size() + s.size() > kMaxBlob) {
      col->blobs.emplace_back();
    }
    std::string& blob = col->blobs.back();
    make_view(views.data() + i * 16, s, static_cast<int32_t>(col->blobs.size() - 1),
              static_cast<int32_t>(blob.size()));
    if (s.size() > kInline) blob.append(s);
  }
  col->values = Buffer(n * 16);
  uint8_t* out = col->values.data();
  std::vector<uint8_t> valid;
  const auto size = static_cast<int64_t>(table.size());
  for (size_t i = 0; i < n; ++i) {
    const int64_t c = codes[i];
    if (c >= 0 && c < size) {
      std::memcpy(out + i * 16, views.data() + c * 16, 16);
    } else {
      if (c >= size) throw std::out_of_range("string column: a code past the table's end");
      if (valid.empty()) valid.assign(n, 1);
      valid[i] = 0;
      std::memset(out + i * 16, 0, 16);
    }
  }
  if (!valid.empty()) col->validity = bitmap_from_bytes(valid.data(), n, &col->null_count);
  return col;
}

}  // namespace

std::shared_ptr<const Column> gather_strings(const std::vector<std::string>& table,
                                             const int64_t* codes, size_t n, std::string name) {
  return gather_strings_of(table, codes, n, std::move(name));
}

std::shared_ptr<const Column> gather_strings(const std::vector<std::string>& table,
                                             const int32_t* codes, size_t n, std::string name) {
  return gather_strings_of(table, codes, n, std::move(name));
}

std::shared_ptr<const Column> polars_enum(std::shared_ptr<const Column> codes,
                                          const std::vector<std::string>& categories) {
  if (codes->format != "C" || codes->null_count != 0) {
    throw std::invalid_argument("enum column: codes must be uint8 without nulls");
  }
  if (categories.empty() || categories.size() > 256) {
    throw std::invalid_argument("enum column: 1 to 256 categories");
  }
  const auto* c = static_cast<const uint8_t*>(codes->values_data());
  uint8_t top = 0;
  for (int64_t i = 0; i < codes->length; ++i) top = std::max(top, c[i]);
  if (codes->length != 0 && top >= categories.size()) {
    throw std::invalid_argument("enum column: a code past the categories");
  }
  auto col = std::make_shared<Column>();
  col->format = "C";
  col->name = codes->name;
  col->length = codes->length;
  col->shared_values = codes->values_data();
  col->shared_owner = codes;  // keeps the codes' storage alive
  std::vector<int64_t> all(categories.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  col->dictionary = gather_strings(categories, all.data(), all.size(), "");
  std::string values;
  for (const std::string& v : categories) {
    values += std::to_string(v.size());
    values += ';';
    values += v;
  }
  static constexpr std::string_view kKey = "_PL_ENUM_VALUES2";
  put_i32(&col->metadata, 1);
  put_i32(&col->metadata, kKey.size());
  col->metadata.append(kKey);
  put_i32(&col->metadata, values.size());
  col->metadata.append(values);
  return col;
}

void export_column(const std::shared_ptr<const Column>& col, ArrowSchema* schema,
                   ArrowArray* array) {
  *schema = ArrowSchema{};
  schema->format = col->format.c_str();
  schema->name = col->name.c_str();
  schema->flags = ARROW_FLAG_NULLABLE;
  if (!col->metadata.empty()) schema->metadata = col->metadata.data();
  auto* spriv = new SchemaPrivate{col, {}};
  schema->private_data = spriv;
  schema->release = &release_schema;

  auto* priv = new ArrayPrivate{col, {}, {}, {}};
  priv->buffers.push_back(col->null_count != 0 ? col->validity.data() : nullptr);
  priv->buffers.push_back(col->values_data());
  if (col->format == "vu") {
    for (const std::string& b : col->blobs) {
      priv->buffers.push_back(b.data());
      priv->blob_sizes.push_back(static_cast<int64_t>(b.size()));
    }
    priv->buffers.push_back(priv->blob_sizes.data());
  }
  *array = ArrowArray{};
  if (col->dictionary != nullptr) {
    export_column(col->dictionary, &spriv->dictionary, &priv->dictionary);
    schema->dictionary = &spriv->dictionary;
    array->dictionary = &priv->dictionary;
  }
  array->length = col->length;
  array->null_count = col->null_count;
  array->n_buffers = static_cast<int64_t>(priv->buffers.size());
  array->buffers = priv->buffers.data();
  array->release = &release_array;
  array->private_data = priv;
}

}  // namespace stallscope::arrow
