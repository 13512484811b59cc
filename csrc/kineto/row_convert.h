// Kineto rows -> event-schema columns, sorted, in one pass (the native importer's conversion;
// python/stallscope/io/kineto/_native.py says what each column means and holds the per-code
// tables). Input: the scanner's columns of each file of an import, as the scanner left them
// (no concatenation: on a folder of 8 V100 ranks, copying them into one set of columns took
// 132 of 525 ms), after the Python side's per-file work (ac2g flows linked, null names mapped
// to the "" code). Rows of the categories `Tables::cat_drop` names (cat "Trace", which HTA
// drops) are left out here rather than in Python, where dropping one row meant a copy of every
// column. Output: one trace mark per file and every row, ordered by rank, start, event index in
// its file (marks: -1), file. The order: with one file per rank (every import that succeeds),
// a stable radix sort of each file's rows by start (they come in event index order); else one
// comparison sort. Then each output column is gathered on its own (one source array at a time:
// fewer cache misses than writing a row of every column; the V100 trace's 123 k rows: 15-20 ->
// 10-11 ms warm). With one file per rank, each file's rows are a run of the output of their
// own: with several files and threads, each thread converts whole files (select, sort, every
// column), so the conversion scales with the cores as the side-by-side read does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace stallscope::kineto {

// One file's scanner columns (kNull = null; string codes >= 0 here except sync: -1 = none),
// n rows.
struct RowsIn {
  size_t n = 0;
  const int32_t* cat;
  const int32_t* name;  // -1: none (read as Tables::null_name)
  const int32_t* sync;  // cuda_sync_kind code, -1 none
  const int64_t* index;
  const int64_t* ts;  // ns, trace clock
  const int64_t* dur;
  const int64_t* pid;
  const int64_t* tid;
  const int64_t* stream;
  const int64_t* device;
  const int64_t* correlation;
  const int64_t* bytes;
  const int64_t* ext;  // args["External id"]
};

// Per-code facts made in Python (one definition of kinds, categories and steps).
struct Tables {
  const uint8_t* cat_kind;  // cat code -> Kind
  const uint8_t* cat_drop;  // cat code -> 1: the category's rows are left out
  size_t n_cat;
  const int64_t* name_step;     // name code -> ProfilerStep number, kNull none
  const uint8_t* name_gpu_cat;  // name code -> Category of GPU rows
  size_t n_name;
  int32_t null_name;        // the code a row without a name gets (the caller's "")
  const uint8_t* kind_gpu;  // Kind -> 1 for GPU activity kinds
};

struct FileIn {
  int32_t rank;
  int64_t base_ns;  // baseTimeNanoseconds
  RowsIn rows;      // its scanner columns (dropped rows included)
};

// Sorted output columns (length: rows kept + files). Marks: kind mark, name `mark_name`, cat
// `mark_cat0 + file` (the caller's code for the file's mark detail), start = end = the first
// start of the file's rank (its base when the rank has no row), ext kNull, sync -1, index -1.
// The columns lie in two malloc'd blocks, left uninitialised until written (a zero fill first
// would be a serial pass, and its page faults, before the threads write): `frame` holds the
// columns of the events frame, `work` the ones the caller reads and drops (cat, sync, ext and
// the links). With one thread, the sort's working arrays borrow the frame block's first pages,
// which the columns need anyway (a fresh page costs a page fault, 3-4 µs on this project's VM).
struct RowsOut {
  std::shared_ptr<void> frame, work;
  size_t rows = 0, inputs = 0;  // output rows; input rows (all files', dropped ones included)
  int64_t *start = nullptr, *end = nullptr, *correlation = nullptr, *bytes = nullptr;
  int32_t *rank = nullptr, *pid = nullptr, *lane = nullptr, *name = nullptr;
  int16_t* device = nullptr;
  uint8_t *kind = nullptr, *category = nullptr;
  int32_t *cat = nullptr, *sync = nullptr;
  int64_t* ext = nullptr;
  // With `links` only (null otherwise): what placing NCCL collectives among the rows needs.
  int64_t* index = nullptr;        // rows
  uint8_t* kind_order = nullptr;   // rows
  int64_t* out_row = nullptr;      // inputs: input row (file order) -> its output row, -1 dropped
  std::vector<int64_t> file_row0;  // per file: start of its event 0 when kept, else kNull
  std::vector<int64_t> file_kept;  // per file: its rows kept (dropped ones left out)
};

// Imports of at least this many rows write their output columns with two threads (one file:
// half of the columns each) or more (several files: whole files each, up to `threads`).
constexpr size_t kConvertThreadsMin = size_t{1} << 15;

// Imports of at least this many rows, converted by one file's columns split over two threads,
// have the output's pages faulted in by a second thread while the rows are sorted. Below it,
// the thread's start measured about what it saved (fresh processes: the A100 NCCL trace's
// 27 k rows, DLRM's 20 k).
constexpr size_t kPrefaultMin = size_t{1} << 16;

// Rows per category code over one file's scanner columns (cat: n codes), and among them the rows
// without a correlation (kNull): what the Python side's per-file work reads (unknown categories
// counted, ac2g flows linked only where a GPU or runtime row lacks one), in one pass instead of
// two NumPy passes over every row. Both outputs have n_cat entries; a code outside [0, n_cat)
// throws std::out_of_range.
void count_by_cat(const int32_t* cat, const int64_t* correlation, size_t n, size_t n_cat,
                  int64_t* rows, int64_t* no_correlation);

// kind_order: Kind -> its rank among the kinds' names (ties of the general reader's sort).
// threads: the most threads to use, this one included (more than one only from
// kConvertThreadsMin rows on; more than two only for several files of one rank each). links:
// also write out_row, index and kind_order (the caller inserts NCCL collectives; most imports
// have none, and these three columns are a sixth of the output's bytes).
RowsOut convert_rows(const Tables& t, const std::vector<FileIn>& files, const uint8_t* kind_order,
                     int32_t mark_cat0, int32_t mark_name, int threads = 2, bool links = true);

}  // namespace stallscope::kineto
