#include "simdev/device/base/workers.hpp"

#include <chrono>
#include <map>

namespace simdev {
namespace {

// Set while a thread runs a piece: a nested run() then stays on that thread.
thread_local bool in_piece = false;

// Waits are bounded: an idle worker wakes this often to look at its queue and the stop flag.
constexpr auto kIdleWake = std::chrono::seconds(1);

}  // namespace

Workers::Workers(size_t threads) {
  if (threads == 0) threads = std::thread::hardware_concurrency();
  for (size_t i = 1; i < threads; ++i) threads_.emplace_back([this] { serve(); });
}

Workers::~Workers() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  work_ready_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void Workers::drain(std::unique_lock<std::mutex>& lock) {
  while (next_ < count_) {
    const size_t i = next_++;
    const auto* piece = piece_;
    lock.unlock();
    in_piece = true;
    (*piece)(i);
    in_piece = false;
    lock.lock();
    if (++finished_ == count_) work_done_.notify_all();
  }
}

void Workers::serve() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (next_ < count_) {
      drain(lock);
      continue;
    }
    work_ready_.wait_for(lock, kIdleWake);
  }
}

void Workers::run(size_t count, const std::function<void(size_t)>& piece) {
  if (count == 0) return;
  if (count == 1 || threads_.empty() || in_piece) {
    for (size_t i = 0; i < count; ++i) piece(i);
    return;
  }
  std::lock_guard turn(run_mutex_);
  std::unique_lock lock(mutex_);
  piece_ = &piece;
  count_ = count;
  next_ = 0;
  finished_ = 0;
  work_ready_.notify_all();
  drain(lock);
  // The pieces are the step's own compute, finite and free of waits; the bound only keeps a
  // lost wake-up from stalling the step.
  while (finished_ < count_) work_done_.wait_for(lock, kIdleWake);
  piece_ = nullptr;
  count_ = 0;
}

std::shared_ptr<Workers> Workers::shared(size_t threads) {
  if (threads == 0) threads = std::thread::hardware_concurrency();
  static std::mutex mutex;
  static std::map<size_t, std::weak_ptr<Workers>> pools;
  std::lock_guard lock(mutex);
  std::shared_ptr<Workers> pool = pools[threads].lock();
  if (!pool) {
    pool = std::make_shared<Workers>(threads);
    pools[threads] = pool;
  }
  return pool;
}

Range split_range(size_t count, size_t parts, size_t i, size_t align) {
  const size_t units = (count + align - 1) / align;
  const size_t first_unit = units * i / parts;
  const size_t end_unit = units * (i + 1) / parts;
  const size_t first = first_unit * align;
  const size_t end = end_unit * align < count ? end_unit * align : count;
  return {first, end > first ? end - first : 0};
}

}  // namespace simdev
