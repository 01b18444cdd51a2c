#include "runner/core/report/progress.hpp"

#include <spdlog/fmt/fmt.h>
#include <unistd.h>

#include <cmath>

namespace runner {
namespace {

constexpr auto kRedraw = std::chrono::milliseconds(100);

std::string duration_text(double seconds) {
  if (!(seconds >= 0.0) || std::isinf(seconds)) return "?";
  if (seconds < 60.0) return fmt::format("{:.0f} s", std::ceil(seconds));
  if (seconds < 3600.0)
    return fmt::format("{:.0f} min {:.0f} s", std::floor(seconds / 60.0),
                       std::fmod(std::ceil(seconds), 60.0));
  return fmt::format("{:.1f} h", seconds / 3600.0);
}

}  // namespace

bool Progress::terminal() { return ::isatty(STDOUT_FILENO) == 1 && ::isatty(STDERR_FILENO) == 1; }

Progress::Progress(std::string what, uint64_t total, bool enabled, std::FILE* out)
    : what_(std::move(what)), total_(total), enabled_(enabled && total > 0), out_(out) {}

std::string Progress::line(uint64_t done, double elapsed_s, std::string_view item) const {
  std::string text = fmt::format("{} {}/{}", what_, done, total_);
  if (!item.empty()) text += fmt::format(" ({})", item);
  if (done > 0 && elapsed_s > 0.0) {
    const double rate = static_cast<double>(done) / elapsed_s;
    text += fmt::format("  {:.1f}/s  ETA {}", rate,
                        duration_text(static_cast<double>(total_ - std::min(done, total_)) / rate));
  }
  return text;
}

void Progress::update(uint64_t done, std::string_view item) {
  if (!enabled_) return;
  const Clock::time_point now = Clock::now();
  if (drawn_ && done < total_ && now - last_draw_ < kRedraw) return;
  last_draw_ = now;
  drawn_ = true;
  const double elapsed = std::chrono::duration<double>(now - start_).count();
  // \r, the line, then erase to the end of the terminal line (ECMA-48 EL).
  std::fprintf(out_, "\r%s\x1b[K", line(done, elapsed, item).c_str());
  std::fflush(out_);
}

void Progress::clear() {
  if (!drawn_) return;
  std::fprintf(out_, "\r\x1b[K");
  std::fflush(out_);
  drawn_ = false;
}

}  // namespace runner
