#include "simdev/service/server/lane.hpp"

#include <chrono>
#include <exception>
#include <utility>

#include <spdlog/spdlog.h>

namespace simdev::service::server {

Lane::Lane(std::string name) : state_(std::make_shared<State>()) {
  state_->name = std::move(name);
  thread_ = std::thread([state = state_] { run(state); });
}

Lane::~Lane() { stop_and_join(); }

void Lane::post(Work work) { state_->queue.enqueue(std::move(work)); }

void Lane::stop_and_join() {
  if (!thread_.joinable()) return;
  // An empty work item is the stop marker: everything queued before it still runs.
  state_->queue.enqueue(Work{});
  // The lane's own last work item may hold the last reference to its owner; joining itself
  // would deadlock, and the thread ends at the marker anyway.
  if (on_lane_thread()) {
    thread_.detach();
    return;
  }
  thread_.join();
}

bool Lane::run_here_if_idle(Work& work) {
  if (state_->queue.size_approx() != 0) return false;
  std::unique_lock lock(state_->running, std::try_to_lock);
  if (!lock.owns_lock()) return false;
  run_item(*state_, work);
  return true;
}

bool Lane::run_here(const Work& work, std::chrono::milliseconds bound) {
  std::unique_lock lock(state_->running, bound);
  if (!lock.owns_lock()) return false;
  run_item(*state_, work);
  return true;
}

void Lane::run_item(State& state, const Work& work) {
  try {
    work();
  } catch (const std::exception& e) {
    spdlog::error("{} lane: work item threw: {}", state.name, e.what());
  } catch (...) {
    spdlog::error("{} lane: work item threw a non-standard exception", state.name);
  }
}

void Lane::run(const std::shared_ptr<State>& state) {
  while (true) {
    Work work;
    // Timed so that the thread never blocks unboundedly, even if a stop marker were lost.
    if (!state->queue.wait_dequeue_timed(work, std::chrono::milliseconds(500))) continue;
    if (!work) return;
    std::lock_guard lock(state->running);
    run_item(*state, work);
  }
}

}  // namespace simdev::service::server
