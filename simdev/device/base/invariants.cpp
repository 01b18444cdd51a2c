#include "simdev/device/base/invariants.hpp"

#include <string_view>

namespace simdev {

void Invariants::fail(const char* file, int line, const char* condition) {
  std::string_view name(file);
  if (const size_t slash = name.rfind('/'); slash != std::string_view::npos) {
    name.remove_prefix(slash + 1);
  }
  const std::string where = std::string(name) + ":" + std::to_string(line) + ": " + condition;
  if (failures_++ == 0) first_ = where;
  if (strict_) throw InvariantBroken("invariant broken at " + where);
}

}  // namespace simdev
