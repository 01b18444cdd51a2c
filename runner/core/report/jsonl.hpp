// --jsonl FILE|-: one JSON object per line, written and flushed the moment each result is
// known, so that a long campaign, bench or conformance run can be followed (`tail -f`, a
// pipe into jq) and a run cut short still leaves every finished record. The last line is the
// report's envelope (envelope.hpp) with "record": "summary".
//
// Unlike the --json report, the file is written in place as the run goes, not atomically:
// a reader sees whole lines only, because each record is one write of one line. A FIFO
// without a reader fails at once instead of blocking. With `-` the records own stdout, and
// everything the command would print there goes to stderr instead.
#pragma once

#include <cstdio>
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "runner/core/report/envelope.hpp"

namespace runner {

class JsonlStream {
 public:
  JsonlStream() = default;
  ~JsonlStream();
  JsonlStream(const JsonlStream&) = delete;
  JsonlStream& operator=(const JsonlStream&) = delete;

  // Opens `path` (created or truncated) or takes stdout for "-". Returns an empty string,
  // else "FLAG 'PATH': why" (bad input: exit 2).
  std::string open(const char* flag, const std::filesystem::path& path);
  bool active() const { return file_ != nullptr; }

  // One line, flushed. The first failure is kept (error()) and later records are dropped.
  void write(const nlohmann::json& record);
  // The last line: the envelope of the report, with "record": "summary".
  // `extra` fields join it (a shard's "shard").
  void write_summary(const Envelope& envelope,
                     const nlohmann::json& extra = nlohmann::json::object());
  // Empty, or why a record could not be written, naming the path.
  const std::string& error() const { return error_; }

 private:
  std::FILE* file_ = nullptr;
  int saved_stdout_ = -1;  // stdout before `-` handed it to the records
  std::string name_;
  std::string error_;
};

}  // namespace runner
