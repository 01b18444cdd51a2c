// Forwards to runner/core/report/progress.hpp, where this header moved. Kept while
// runner/smoke/ or tests/runner/smoke/ include this path; new code includes the new one.
#pragma once

#include "runner/core/report/progress.hpp"
