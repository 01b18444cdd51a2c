// invariants.hpp: SIMDEV_ASSERT, the simulator's check of its own internal invariants. Always
// compiled, as TigerBeetle keeps its assertions in production builds: a broken invariant that
// nothing checks surfaces later as a wrong number far from its cause.
//
// A device's invariants are either counted (the default: a long campaign reports every one
// that broke, in the diagnostic report) or, under the device option `strict=on`, fatal to the
// device: the failing check throws InvariantBroken, which the runtime's exception barrier
// turns into CALRT_INTERNAL naming the file, line and condition, and every later call that
// gives the device work fails with the same words. The run stops at the line that broke,
// without aborting the process that hosts the device. Campaigns and scenarios run strict.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace simdev {

struct InvariantBroken : std::logic_error {
  using std::logic_error::logic_error;
};

class Invariants {
 public:
  void set_strict(bool strict) { strict_ = strict; }
  bool strict() const { return strict_; }
  // Strict and broken: the device takes no more work.
  bool stopped() const { return strict_ && failures_ > 0; }
  uint64_t failures() const { return failures_; }
  // "kv_allocator.cpp:41: free_tokens_ <= total_tokens_"; empty while none has failed.
  const std::string& first_failure() const { return first_; }

  // Records a failed check; throws InvariantBroken when strict. Inline: the service client
  // holds the device's handle tables without the device library.
  void fail(const char* file, int line, const char* condition) {
    std::string_view name(file);
    if (const size_t slash = name.rfind('/'); slash != std::string_view::npos) {
      name.remove_prefix(slash + 1);
    }
    const std::string where = std::string(name) + ":" + std::to_string(line) + ": " + condition;
    if (failures_++ == 0) first_ = where;
    if (strict_) throw InvariantBroken("invariant broken at " + where);
  }

 private:
  bool strict_ = false;
  uint64_t failures_ = 0;
  std::string first_;
};

}  // namespace simdev

#define SIMDEV_ASSERT(invariants, condition) \
  ((condition) ? static_cast<void>(0) : (invariants).fail(__FILE__, __LINE__, #condition))
