// DetailJob: the detail column of the native importer's converted rows (row_convert.h), written
// straight into Arrow view buffers: row i is cat_table[cat[i]] (the cleaned "cat=<cat>", or a
// trace mark's or a collective's whole detail), then ";ext=<External id>" where ext[i] is not
// null, then ";sync_kind=<v>" where sync[i] >= 0 (sync_table: the cleaned args strings).
//
// The constructor checks the codes and sizes the buffers on the thread that makes the job;
// then (when asked) threads of the job's own write the rows while the caller builds its other
// columns. The buffers come from the caller's glibc arena: a second thread allocates from an
// arena of its own, whose blocks are fresh pages even where the caller's heap has freed blocks
// to reuse (blocks past glibc's mmap threshold are fresh mappings from either thread). The rows
// are written in parts of kPart rows: the threads take parts from the front, and the caller,
// once its own columns are made, takes the rest from the back (result()), so none waits while
// another has rows left.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "arrow/column_export.h"

namespace stallscope::kineto {

class DetailJob {
 public:
  // cat, ext (kNull: none) and sync (-1: none): n rows each, which the caller keeps alive and
  // unchanged for the job's life. out_of_range for a code past its table's end.
  DetailJob(const int32_t* cat, const int64_t* ext, const int32_t* sync, size_t n,
            std::vector<std::string> cat_table, std::vector<std::string> sync_table);
  DetailJob(const DetailJob&) = delete;
  DetailJob& operator=(const DetailJob&) = delete;
  ~DetailJob();  // joins the job's threads

  // Writes the rows on `threads` threads of their own (each taking parts from the front);
  // result() waits for them. invalid_argument for 0 threads, logic_error when started already.
  void start(size_t threads);
  // The column ("detail"): the parts the threads have not taken are written on the calling
  // thread (all of them when the job was not started), then the threads are joined and their
  // error, if any, rethrown. logic_error when the result was taken already.
  std::shared_ptr<const arrow::Column> result();

  static constexpr size_t kPart = 8192;  // rows a part (about 0.2 ms of writing)

 private:
  void join();
  // The bytes row i takes at most: ";ext=" and at most 20 digits bound the External id.
  size_t row_bound(size_t i) const;
  // The next part not taken: from the front (a thread) or the back (the caller); false when
  // none is left.
  bool claim(bool front, size_t* k);
  void fill(size_t k);

  const int32_t* cat_;
  const int64_t* ext_;
  const int32_t* sync_;
  size_t n_;
  std::vector<std::string> cat_table_, sync_table_;
  std::optional<arrow::ViewBuilder> builder_;
  std::mutex claim_;
  size_t front_ = 0, back_ = 0;  // the parts not taken: [front_, back_)
  std::exception_ptr failed_;
  bool started_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace stallscope::kineto
