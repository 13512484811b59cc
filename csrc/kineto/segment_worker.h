// SegmentWorker: a second StreamScanner on its own thread, so that one buffer of a trace's text
// is read by two cores (the scan, not the gunzip, is what bounds an import).
//
// The owner (StreamScanner::parse_split) guesses an event's start in the later part of a buffer
// inside traceEvents: a '{' that follows `}` `,` across whitespace. The worker reads events from
// there (the text in place: the owner leaves it untouched until take_pending) with its own
// dictionaries while the owner reads up to that byte. The guess stands only when the owner's
// own reading arrives there ready to read the next element of traceEvents, with whitespace
// alone between; the owner then says so (take()), and the worker appends its complete events
// to the owner's (codes mapped into its dictionaries, event indices offset by its count) while
// the owner's thread gunzips the next buffer. At the next buffer (take_pending) the owner waits
// for that and reads on after the last of them.
// A wrong guess (the bytes were inside a string, say) costs the worker's time only: the owner
// reads the part itself. Either way the result is the one thread's, value for value and code
// for code (the worker's strings are interned in its reading order, after the owner's).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
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
  // the caller's until wait() returns. Once read, the events wait for the owner's verdict.
  void start(const char* begin, size_t size, StreamScanner* owner);
  // The owner's verdict, once its own reading reached the guessed start ready for an element:
  // the worker appends its events to the owner's (after the owner's own) on its thread, while
  // the owner's thread goes on (the owner must not touch its columns or dictionaries until
  // wait() returns).
  void take();
  // Waits for the job (its hand-over included): the bytes read to the end of its last
  // complete event (0: none, nothing handed over). *waited (when given): whether the job was
  // still running.
  size_t wait(bool* waited);
  // Drops the job: waits for its reading and keeps none of its events.
  void discard();

 private:
  void run();
  // Appends the job's events to `owner`'s (after its own) and empties the worker.
  void hand_over(StreamScanner* owner);

  // The owner's columns' pages just past their ends, faulted in while this thread waits for
  // its next job: the owner's own rows and the next hand-over then write them without a page
  // fault each (0.8-1.5 µs on this project's VM; populating takes ~0.4 µs a page, in time
  // otherwise spent waiting). The ranges are taken at the end of a hand-over, while the owner
  // leaves its columns alone; populating leaves content as it is, so the owner may write the
  // same pages meanwhile (and memory the owner has since moved away from only costs the call).
  struct Ahead {
    const void* data = nullptr;  // the column's storage when last seen
    uintptr_t done = 0;          // populated up to here
    uintptr_t from = 0, to = 0;  // what to populate next
  };
  static constexpr size_t kAheadRows = 4096;
  template <typename T>
  void plan_ahead(const std::vector<T>& column, Ahead* a);
  void plan_ahead(const StreamScanner& owner);
  void populate_ahead();  // until a job arrives (or quit)
  std::vector<Ahead> ahead_;

  StreamScanner scan_{0};  // never splits itself
  // worker code -> owner code, per dictionary; grows with the worker's dictionaries, which
  // (like the owner's) live as long as the import.
  std::vector<int32_t> cat_map_, name_map_, args_map_;

  // Hand-overs: each side publishes under mu_ (publish) and waits (block_until) by spinning on
  // the flags for up to kSpinNs first, then sleeping on cv_. A wake-up through the kernel cost
  // the waker 8-15 µs and the sleeper 30-100 µs before it ran again on the 2-vCPU VM (a
  // condition-variable ping-pong, medians), three times per buffer; a spinning side sees the
  // flag within a microsecond, and the publisher then makes no system call.
  static constexpr int64_t kSpinNs = 200000;
  template <typename Pred>
  void block_until(Pred ready);
  template <typename Set>
  void publish(Set set);

  std::mutex mu_;
  std::condition_variable cv_;
  int sleepers_ = 0;  // threads asleep on cv_ (under mu_): publish notifies only when any are
  // The job, written before the flag that hands it over (release) and read after it (acquire).
  const char* begin_ = nullptr;
  size_t size_ = 0;
  StreamScanner* owner_ = nullptr;
  size_t used_ = 0;
  std::exception_ptr error_;  // the hand-over's, raised on the owner's thread by wait()
  enum Verdict { kUndecided, kTake, kDrop };
  std::atomic<int> verdict_{kUndecided};
  std::atomic<bool> done_{true}, quit_{false};  // done_: no job running (false: one is)
  std::thread thread_;                          // last: started once the members above exist
};

}  // namespace stallscope::kineto
