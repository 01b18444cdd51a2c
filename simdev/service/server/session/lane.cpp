#include "simdev/service/server/session/lane.hpp"

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
  {
    std::lock_guard lock(state_->gate);
    if (state_->running || state_->queue.size_approx() != 0) return false;
    state_->running = true;
  }
  run_item(*state_, work);
  leave(*state_);
  return true;
}

bool Lane::run_here(const Work& work, std::chrono::milliseconds bound) {
  const auto deadline = std::chrono::steady_clock::now() + bound;
  if (!enter(*state_, &deadline)) return false;
  run_item(*state_, work);
  leave(*state_);
  return true;
}

bool Lane::enter(State& state, const std::chrono::steady_clock::time_point* deadline) {
  std::unique_lock lock(state.gate);
  while (state.running) {
    if (deadline == nullptr) {
      // Bounded re-checks; whoever runs an item notifies when it is done.
      state.gate_free.wait_for(lock, std::chrono::milliseconds(500));
    } else if (state.gate_free.wait_until(lock, *deadline) == std::cv_status::timeout &&
               state.running) {
      return false;
    }
  }
  state.running = true;
  return true;
}

void Lane::leave(State& state) {
  {
    std::lock_guard lock(state.gate);
    state.running = false;
  }
  state.gate_free.notify_all();
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
    enter(*state, nullptr);
    run_item(*state, work);
    leave(*state);
  }
}

}  // namespace simdev::service::server
