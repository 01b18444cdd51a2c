// `calrt merge SHARD.jsonl...`: joins the --jsonl outputs of a run split with --shard I/N
// (runner/core/report/shard.hpp) into the stream one unsharded run writes: the records in the order
// of their units' indices, and a summary whose counts are the shards' sums, whose result is
// the worst of theirs, and whose command line is shard 0's without --shard. Shards must be
// the same run: the same command line but for --shard and the report paths (--jsonl, --json,
// --md, --junit, --csv, --trace), which each machine chooses. On the simulator, which is
// deterministic, the merged file is byte for byte the --jsonl of the unsharded run given
// shard 0's report paths.
//
// Refused (exit 2, naming the file): a line that is not JSON, a file without its summary (a
// shard cut short), a shard missing or given twice, shards of different runs (command line,
// schema or tool version), a unit in two shards.
#pragma once

#include <string>
#include <vector>

namespace runner {

struct MergeOptions {
  std::vector<std::string> shards;
  std::string out = "-";
};

// Returns the process exit code: 0 merged and PASS, 1 merged and the run FAILed, 2 bad input.
int run_merge(const MergeOptions& options);

}  // namespace runner
