// version.hpp: the project's version, the runtime ABI it speaks and the commit it was built
// from, for `--version` and the reports. One place, so that every tool and report says the same.
#pragma once

#include <string>

namespace calrt_version {

// "0.1.0": the CMake project version.
const char* project();
// The git commit of the source tree at configure time, "unknown" outside a git checkout.
const char* commit();
// One line: "<tool> 0.1.0 (commit 1a2b3c4d, runtime ABI 0.7)".
std::string line(const char* tool);

}  // namespace calrt_version
