// The host threads a device's functional compute runs on. A step hands them independent
// pieces (the chips of a step, or slices of one matmul's output rows) and waits for all of
// them; each piece writes only its own outputs and computes them as a single thread would, so
// the results are the same bits whatever the thread count and timing. Nothing the device
// models depends on them: the virtual clock and the event order are decided elsewhere.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace simdev {

class Workers {
 public:
  // `threads` counts the caller: 1 runs everything on the calling thread; 0 takes the
  // machine's hardware threads.
  explicit Workers(size_t threads);
  Workers(const Workers&) = delete;
  Workers& operator=(const Workers&) = delete;
  ~Workers();

  size_t threads() const { return threads_.size() + 1; }

  // The process's pool of that many threads (0: the machine's), made on first use and kept
  // while someone holds it: every calbin of every device in the process shares it, so a
  // client that configures many calbins does not start threads for each. Callers from
  // different threads take turns (run is serialised); the device runs one step at a time
  // anyway.
  static std::shared_ptr<Workers> shared(size_t threads);

  // Runs piece(i) for every i in [0, count) and returns when all have finished; the caller
  // takes pieces too. A call from inside a piece runs its pieces inline, so a matmul split
  // inside one chip's piece does not wait on the other chips' threads.
  void run(size_t count, const std::function<void(size_t)>& piece);

 private:
  void serve();
  // Takes and runs pieces of the current batch until none is left.
  void drain(std::unique_lock<std::mutex>& lock);

  std::mutex run_mutex_;  // one run() at a time from outside the pool
  std::mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable work_done_;
  const std::function<void(size_t)>* piece_ = nullptr;
  size_t count_ = 0;
  size_t next_ = 0;
  size_t finished_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

// Splits [0, count) into `parts` contiguous ranges of sizes differing by at most one, each a
// multiple of `align` but the last; part i is [first, first + size).
struct Range {
  size_t first = 0;
  size_t size = 0;
};
Range split_range(size_t count, size_t parts, size_t i, size_t align = 1);

}  // namespace simdev
