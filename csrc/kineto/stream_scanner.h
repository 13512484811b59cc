// The streaming reader of Kineto (Chrome trace) JSON: fed the decompressed text in chunks, it
// walks it once without building a DOM or keeping the text, and keeps per file only what the
// importer uses:
//  - complete events (ph "X") that pass the importer's row checks, as typed columns (ts / dur as
//    integer ns; strings as codes into dictionaries shared by every file of one import);
//  - flow events (ph s / f / t) for the ac2g links;
//  - counts of the rows dropped per reason;
//  - the top-level members other than traceEvents, as JSON text (metadata, a few KiB);
//  - HTA's textual rank (see rank_search.h).
// Numbers follow the importer's typed decoder (msgspec): a file whose ts (dur) has any value
// written as a float takes every ts (dur) as float64 µs, rounded to ns; otherwise integers.
// Anything outside the common shape (a list where a scalar belongs, a float pid, a duplicated
// key, invalid JSON) makes the file "unsupported": the caller then uses its general reader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "kineto/dict.h"
#include "kineto/json_cursor.h"
#include "kineto/layout_memo.h"
#include "kineto/rank_search.h"

namespace stallscope::kineto {

constexpr int64_t kNull = std::numeric_limits<int64_t>::min();  // null in int64 columns

// Int64 columns of kept complete events (kNull = null), in this order.
enum RowInt {
  kRowIndex,  // position of the event in traceEvents (every event counts)
  kRowTs,     // start, ns, trace clock (before baseTimeNanoseconds)
  kRowDur,    // duration, ns
  kRowPid,
  kRowTid,
  kRowCorrelation,  // args.correlation
  kRowStream,
  kRowExtId,  // args["External id"]
  kRowDevice,
  kRowBytes,
  kNumRowInt
};
// Int32 string codes of kept complete events (-1 = null): cat and name into their own
// dictionaries, cuda_sync_kind into the shared "args" dictionary.
enum RowStr { kRowCat, kRowName, kRowSyncKind, kNumRowStr };
// NCCL metadata (record_param_comms rows with a "Collective name"), sparse: the event's index,
// then these. Strings are codes into the "args" dictionary.
enum NcclInt { kNcclIndex, kNcclGroupSize, kNcclInNelems, kNumNcclInt };
enum NcclStr { kNcclColl, kNcclDtype, kNcclPg, kNcclPgDesc, kNcclPgRanks, kNumNcclStr };
// Flow events: pid, tid, ts (ns), id (kNull = null); cat codes separately.
enum FlowInt { kFlowPid, kFlowTid, kFlowTs, kFlowId, kNumFlowInt };

// Rows dropped, per reason (the importer's wording lives in Python).
enum Problem { kNoDur, kNoCat, kBadTime, kNegativeDur, kNumProblems };

struct FileResult {
  std::vector<int64_t> rows[kNumRowInt];
  std::vector<int32_t> strs[kNumRowStr];
  std::vector<int64_t> nccl[kNumNcclInt];
  std::vector<int32_t> nccl_strs[kNumNcclStr];
  std::vector<int64_t> flows[kNumFlowInt];
  std::vector<int32_t> flow_cat;
  int64_t problems[kNumProblems] = {};
  int64_t events = 0;     // elements of traceEvents
  bool ts_float = false;  // ts read as float64 (HTA then rounds: ceil(ts))
  std::string meta_json;  // {"traceEvents":[], <the other top-level members>}
  bool rank_found = false;
  int64_t rank = -1;  // HTA's textual rank, when found
};

class SegmentWorker;

class StreamScanner {
 public:
  // Chunks fed from this many bytes on are read by two threads (segment_worker.h).
  static constexpr size_t kSplitMin = size_t{1} << 16;
  // Text gathered before it is read (and split between the threads): each split costs two
  // thread wake-ups, tens of µs each on a VM, where 0.25 MiB of text is read in ~0.4 ms. On the
  // 2-core VM 0.5 MiB read the large traces 7-15 % faster than 0.25 MiB and as fast as 1 MiB.
  static constexpr size_t kFillBytes = size_t{1} << 19;

  // split_min: the smallest chunk (bytes) read by two threads; 0: one thread. Machines with one
  // core read with one thread. fill_bytes: the text gathered before it is read, when reading
  // with two threads (tests make it small, to cut values at chosen places).
  explicit StreamScanner(size_t split_min = kSplitMin, size_t fill_bytes = kFillBytes);
  ~StreamScanner();
  StreamScanner(const StreamScanner&) = delete;
  StreamScanner& operator=(const StreamScanner&) = delete;

  // Starts a new file (the dictionaries are kept). `text_bytes`: the expected size of its text,
  // if known (columns are reserved for it: no regrowth copies; untouched pages cost nothing).
  void begin_file(size_t text_bytes = 0);
  // Appends text and reads as far as it goes. Returns false once the file is unsupported.
  bool feed(std::string_view chunk);
  // The same without a copy: the caller writes the text straight into the scanner's fill
  // buffer (input_space(), at least one byte), then says how many bytes it wrote
  // (input_done(n)). Returns false once the file is unsupported.
  struct Span {
    char* data;
    size_t size;
  };
  Span input_space();
  bool input_done(size_t n);
  // End of the file's text: true and *out filled, or false (reason()).
  bool end_file(FileResult* out);
  // Frees what reading needs (the text buffers, the second thread and its columns) once the
  // last file is read: the conversion that follows holds the most memory of an import. The
  // dictionaries stay; reading again makes the rest anew.
  void release_buffers();
  const std::string& reason() const { return reason_; }

  // Files read by another scanner of the same import, merged after: `other`'s strings interned
  // here, and per dictionary its code -> this scanner's code (cat, name, args).
  struct CodeMaps {
    std::vector<int32_t> cat, name, args;
  };
  CodeMaps adopt(const StreamScanner& other) {
    return {cats_.adopt(other.cats_), names_.adopt(other.names_), args_.adopt(other.args_)};
  }
  const Dict& cats() const { return cats_; }
  const Dict& names() const { return names_; }
  const Dict& args() const { return args_; }
  // Chunks whose second half another thread read (its events taken), and whose split was
  // guessed at a place that was not an event's start (read by this thread alone).
  int64_t splits_taken() const { return splits_taken_; }
  int64_t splits_missed() const { return splits_missed_; }

 private:
  friend class SegmentWorker;
  enum State { kStart, kTopFirst, kTopKey, kTopNext, kEvent, kEventNext, kDone, kFailed };

  // A ts or dur value as written: an integer (µs) or a float64 (its bits), and flags.
  struct Time {
    uint8_t flags;  // kHas | kFloat
    int64_t bits;
  };
  static constexpr uint8_t kHas = 1, kFloat = 2;
  // One event's fields while it is read (committed only when complete).
  struct Event {
    int ph = 0;  // 0 other / null, 1 "X", 2 flow (s, f, t)
    int64_t ints[kNumRowInt];
    int32_t strs[kNumRowStr];
    int64_t nccl[kNumNcclInt];
    int32_t nccl_strs[kNumNcclStr];
    int64_t id;
    Time ts, dur;
    void clear();
  };

  // Reads [begin, begin + size) from the current state; returns the bytes read up to the last
  // complete value (the rest is read again once more text has come). until_events: stop at the
  // first element of traceEvents, before reading it.
  size_t parse(const char* begin, size_t size, bool final, bool until_events = false);
  // parse() of a chunk in the traceEvents list with a SegmentWorker reading its second part,
  // which is taken (take_pending) at the next feed() or end_file(): the worker reads on while
  // the caller gunzips the next chunk.
  size_t parse_split(const char* begin, size_t size);
  void take_pending();
  // The worker's part, if one is pending, dropped unread (a file left before its end).
  void drop_pending();
  // The worker's side: events (an element's '{' at begin, then `, {...}` ...) read into this
  // scanner's columns; the bytes read up to the end of the last complete event (0: none).
  size_t scan_events(const char* begin, size_t size);
  // The worker's side: drop the events read (dictionaries and their codes are kept).
  void clear_events();
  void top_member();
  void event();
  void args(Event& ev);
  // The gap before an object's next key at the cursor (layout_memo.h). Where `g` (null: past
  // the memo's positions) holds it: stepped over in one compare, its key or kGapEnd. Else the
  // separator read token by token (none at pos 0): kGapEnd at the closing brace (kept in `g`),
  // kGapMiss when a key follows (the caller reads it, then keep_gap() from where this began).
  [[gnu::always_inline]] inline int next_gap(Gap* g, unsigned pos);
  // Keeps in `g` the gap from `from` to the cursor, followed by `key`: only whole, with the
  // value's first byte in the span (the blanks before it all read).
  void keep_gap(Gap* g, const char* from, int key) {
    if (g != nullptr && cur_.left() > 0) g->learn(from, cur_.pos(), key);
  }
  // A value the general reader keeps as a scalar (a number, a string or null), checked and
  // not kept; else `why` (an object, a list or a bool: that reader types the column apart).
  void skip_scalar(const char* why) {
    char c = cur_.peek();
    if (c == '{' || c == '[' || c == 't' || c == 'f') throw Unsupported{why};
    cur_.skip_value(1);
  }
  void int_field(int64_t* out);
  void str_field(Dict& dict, int32_t* out);
  void time_field(Time* t, bool* any_float);
  void commit(const Event& ev);

  Cursor cur_;
  State state_ = kStart;
  // feed() of text in place: the fill buffer's (two threads), or the caller's (one thread).
  bool feed_now(std::string_view chunk);
  // feed_now() of the fill buffer's text; the buffer is then the worker's until take_pending.
  bool flush_fill();
  size_t fill_bytes_;
  std::unique_ptr<char[]> fill_, held_;  // fill_bytes_ each, made on first use
  size_t fill_size_ = 0;
  std::string buf_;  // a value cut by a chunk's end (read again with the next chunk)
  std::string reason_;
  bool found_events_ = false;
  bool ts_any_float_ = false, dur_any_float_ = false;
  int64_t events_ = 0;  // events read so far in this file
  std::string meta_;
  RankSearch rank_;
  Event ev_;
  // Complete and flow events as read; times stay as written until the file-wide float decision.
  // rows[kRowTs], rows[kRowDur] and flows[kFlowTs] hold Time::bits; their flags are here.
  FileResult staged_;
  std::vector<uint8_t> ts_flags_, dur_flags_, flow_ts_flags_;

  Dict cats_, names_, args_;
  // The gaps before each key of an event (by its ph) and of its args (by its category), as
  // this file laid them out last (layout_memo.h): the key stepped over in one compare.
  static constexpr int kGapEnd = 127;    // a gap's key: the object's closing brace
  static constexpr int kGapMiss = -128;  // next_gap(): not in the memo, a key follows
  LayoutMemo<4, 16> event_gaps_;
  LayoutMemo<16, 24> args_gaps_;

  size_t split_min_;
  std::unique_ptr<SegmentWorker> worker_;  // made at the first split
  const char* seg_begin_ = nullptr;        // the worker's part of the last split: inside held_
  size_t seg_size_ = 0;
  bool pending_ = false;   // the worker's part not taken yet
  double split_at_ = 0.4;  // where a chunk's split is sought (its fraction)
  int64_t splits_taken_ = 0, splits_missed_ = 0;
  bool seg_ts_float_ = false, seg_dur_float_ = false;  // worker: as of its last complete event
};

}  // namespace stallscope::kineto
