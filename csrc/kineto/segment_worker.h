// SegmentWorker: a second StreamScanner on its own thread, so that one chunk of a trace is read
// by two cores (the scan, not the gunzip, is what bounds an import).
//
// The owner (StreamScanner::parse_split) guesses an event's start in the later part of a chunk
// inside traceEvents: a '{' that follows `}` `,` across whitespace. The worker reads events from
// there (a copy of the text) with its own dictionaries while the owner reads up to that byte.
// The guess stands only when the owner's own reading arrives there ready to read the next
// element of traceEvents, with whitespace alone between; then, at the next chunk (the worker
// reads on while the caller gunzips it), the owner takes the worker's complete events (codes
// mapped into its dictionaries, event indices offset by its count) and reads on after the last
// of them.
// A wrong guess (the bytes were inside a string, say) costs the worker's time only: the owner
// reads the half itself. Either way the result is the one thread's, value for value and code
// for code (the worker's strings are interned in its reading order, after the owner's).
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "kineto/stream_scanner.h"

namespace stallscope::kineto {

class SegmentWorker {
 public:
  SegmentWorker();
  ~SegmentWorker();  // stops and joins the thread
  SegmentWorker(const SegmentWorker&) = delete;
  SegmentWorker& operator=(const SegmentWorker&) = delete;

  // Starts reading events from [begin, begin + size) (begin: the guessed '{'); the bytes stay
  // the caller's until wait() returns.
  void start(const char* begin, size_t size);
  // Waits for the job: the bytes read to the end of its last complete event (0: none).
  // *waited (when given): whether the job was still running.
  size_t wait(bool* waited);
  // Appends the job's events to `owner`'s (after its own) and empties the worker.
  void hand_over(StreamScanner* owner);
  // Waits for the job (if one runs) and drops its events.
  void discard();

 private:
  void run();

  StreamScanner scan_{0};  // never splits itself
  // worker code -> owner code, per dictionary; grows with the worker's dictionaries, which
  // (like the owner's) live as long as the import.
  std::vector<int32_t> cat_map_, name_map_, args_map_;

  std::mutex mu_;
  std::condition_variable cv_;
  const char* begin_ = nullptr;
  size_t size_ = 0;
  size_t used_ = 0;
  bool job_ = false, done_ = true, quit_ = false;  // done_: no job running
  std::thread thread_;                             // last: started once the members above exist
};

}  // namespace stallscope::kineto
