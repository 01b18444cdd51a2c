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
  struct State {
    std::string name;
    moodycamel::BlockingConcurrentQueue<Work> queue;
  };
  static void run(const std::shared_ptr<State>& state);

  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace simdev::service::server
