// lane.hpp: one worker thread fed by a blocking concurrent queue, in FIFO order. The device
// lane serves every session's device calls; each session has a wait lane for Job_Wait.
#pragma once

#include <functional>
#include <memory>
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
  // Runs what is queued before the stop, then joins. Idempotent; must not be called from
  // the lane's own thread.
  void stop_and_join();
  bool on_lane_thread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  // Shared with the thread, so that a lane released from its own thread (see stop_and_join)
  // leaves the thread a valid queue to reach its stop marker in.
  // moodycamel's semaphore spins up to 10000 times before it sleeps: a lane that has just
  // gone idle burns a core that the io thread and the clients need (2 cores in CI). It sleeps
  // at once instead. A decode step over the socket measured the same either way (1226-1292
  // against 1252-1320 us, three alternating runs each, benchmarks/README.md), so nothing is
  // given up for it.
  struct QueueTraits : moodycamel::ConcurrentQueueDefaultTraits {
    static const int MAX_SEMA_SPINS = 0;
  };
  struct State {
    std::string name;
    moodycamel::BlockingConcurrentQueue<Work, QueueTraits> queue;
  };
  static void run(const std::shared_ptr<State>& state);

  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace simdev::service::server
