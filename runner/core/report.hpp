// Forwards to runner/core/report/report.hpp, where this header moved. Kept while
// runner/smoke/, core/session.hpp or tests/runner/smoke/ include this path; new code
// includes the new one.
#pragma once

#include "runner/core/report/report.hpp"
