// Rate-limited warnings about refused peers. A uid that may not connect can still open
// connections as fast as the kernel accepts them (741,718 in 15 s on a 0666 socket), and one
// warning each filled the daemon's stderr at 10 MB/s. Per peer: the first refusal is logged,
// the ones within the next `quiet` are only counted, and the first after it is logged with
// that count. The peers remembered are bounded; the oldest is forgotten first.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace simdev::service::server {

class RefusalLog {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr size_t kMaxPeers = 1024;

  explicit RefusalLog(Clock::duration quiet = std::chrono::seconds(10)) : quiet_(quiet) {}

  // The line to log for this refusal of `peer` (e.g. "uid 1001"), or nullopt to stay quiet.
  std::optional<std::string> note(const std::string& peer, const std::string& why,
                                  Clock::time_point now) {
    auto it = peers_.find(peer);
    if (it == peers_.end()) {
      if (peers_.size() >= kMaxPeers) forget_oldest();
      peers_.emplace(peer, Entry{now, 0});
      return why;
    }
    Entry& entry = it->second;
    if (now - entry.logged < quiet_) {
      ++entry.suppressed;
      return std::nullopt;
    }
    std::string line = why;
    if (entry.suppressed > 0) {
      line += " (and " + std::to_string(entry.suppressed) + " more refusals of " + peer +
              " not logged since the last line)";
    }
    entry = Entry{now, 0};
    return line;
  }

 private:
  struct Entry {
    Clock::time_point logged;
    uint64_t suppressed = 0;
  };
  void forget_oldest() {
    auto oldest = peers_.begin();
    for (auto it = peers_.begin(); it != peers_.end(); ++it) {
      if (it->second.logged < oldest->second.logged) oldest = it;
    }
    peers_.erase(oldest);
  }

  Clock::duration quiet_;
  std::map<std::string, Entry> peers_;
};

}  // namespace simdev::service::server
