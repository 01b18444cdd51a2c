// Exit codes of every subcommand of both tools (`calrt`, `simdev`).
//   0  every step passed.
//   1  a step failed: the device or runtime reported an error, a job failed or timed out,
//      a check or a numeric metric did not pass. Found while talking to the device.
//   2  usage or bad input, found on the host before any device step: bad options, a
//      missing or malformed calbin, a file whose size or hash is wrong, a missing or
//      malformed golden set, a runtime library that cannot be loaded, an unwritable report.
#pragma once

namespace calrt::cli {

inline constexpr int kExitPass = 0;
inline constexpr int kExitFail = 1;
inline constexpr int kExitUsage = 2;

}  // namespace calrt::cli
