// Forwards to runner/core/device/device_select.hpp, where this header moved. Kept while
// core/session.hpp includes this path; new code includes the new one.
#pragma once

#include "runner/core/device/device_select.hpp"
