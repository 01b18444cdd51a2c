// lane.hpp: one worker thread fed by a blocking concurrent queue, in FIFO order. The device
// lane serves every session's device calls; each session has a wait lane for Job_Wait.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <concurrentqueue/blockingconcurrentqueue.h>

namespace simdev::service::server {

class Lane {
 public:
  using Work = std::function<void()>;

  explicit Lane(std::string name);
  ~Lane();
  Lane(const Lane&) = delete;
  Lane& operator=(const Lane&) = delete;

  void post(Work work);
  // Runs `work` on the calling thread when the lane has nothing queued and is between items,
  // as if it were the lane's next item (the lane waits meanwhile); else returns false and
  // leaves `work` alone. Saves the two thread hand-offs of a post and its answer for a short
  // call (benchmarks/README.md); never for one that may block.
  bool run_here_if_idle(Work& work);
  // Runs `work` on the calling thread between two of the lane's items, waiting up to
  // `bound` for the one running; false when it did not run. For another thread that must
  // touch the lane's state briefly. Bounded, because the running item may be waiting for
  // the caller's own thread (a session's cleanup joins its wait lane).
  bool run_here(const Work& work, std::chrono::milliseconds bound);
  // Runs what is queued before the stop, then joins. Idempotent; must not be called from
  // the lane's own thread.
  void stop_and_join();
  bool on_lane_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  // Shared with the thread, so that a lane released from its own thread (see stop_and_join)
  // leaves the thread a valid queue to reach its stop marker in.
  // moodycamel's semaphore spins up to 10000 times before it sleeps: a lane that has just
  // gone idle burns a core that the io thread and the clients need (2 cores in CI). It sleeps
  // at once instead; a decode step over the socket takes the same time either way
  // (benchmarks/README.md, "calrt_service_bench").
  struct QueueTraits : moodycamel::ConcurrentQueueDefaultTraits {
    static const int MAX_SEMA_SPINS = 0;
  };
  struct State {
    std::string name;
    moodycamel::BlockingConcurrentQueue<Work, QueueTraits> queue;
    // Whether a work item runs, on the lane or through run_here*: one at a time. A flag
    // under a plain mutex rather than a timed mutex, whose timed lock ThreadSanitizer does
    // not see (pthread_mutex_clocklock), so that every hand-over stays visible to it.
    std::mutex gate;
    std::condition_variable gate_free;
    bool running = false;
  };
  // Takes the turn to run an item: waits until none runs, up to `deadline` if given.
  static bool enter(State& state, const std::chrono::steady_clock::time_point* deadline);
  static void leave(State& state);
  static void run_item(State& state, const Work& work);
  static void run(const std::shared_ptr<State>& state);

  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace simdev::service::server
