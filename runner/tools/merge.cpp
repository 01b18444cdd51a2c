#include "runner/tools/merge.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <stdexcept>

#include "runner/core/exit_codes.hpp"
#include "runner/core/report/envelope.hpp"
#include "runner/core/report/output_file.hpp"

namespace runner {
namespace {

using nlohmann::json;

// The longest record calrt writes is a scenario run with its events, a few hundred KB.
constexpr size_t kMaxLine = size_t{64} << 20;

class BadShard : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct ShardFile {
  std::string path;
  std::vector<json> records;  // in file order
  json summary;
  uint32_t index = 0, count = 0;
};

// A shell word of shell_command_line(): single-quoted (a quote written '\'') or plain.
constexpr const char* kWord = R"(('([^']|'\\'')*'|[^ ]+))";

// The command line without its --shard: the merged summary's.
std::string without_shard(const std::string& command_line) {
  static const std::regex shard(std::string(" --shard[= ]") + kWord);
  return std::regex_replace(command_line, shard, "");
}

// What every shard must share: the command line without --shard and without where its
// reports went (each machine writes its own files).
std::string run_identity(const std::string& command_line) {
  static const std::regex outputs(std::string(" --(jsonl|json|md|junit|csv|trace)[= ]") + kWord);
  return std::regex_replace(without_shard(command_line), outputs, "");
}

// One line without its '\n'; false at the end of the file. Stops reading a line once it is
// longer than kMaxLine (the caller refuses it), so a hostile file cannot exhaust memory.
bool read_line(std::istream& in, std::string& line) {
  line.clear();
  std::streambuf* buffer = in.rdbuf();
  for (;;) {
    const int c = buffer->sbumpc();
    if (c == std::char_traits<char>::eof()) return !line.empty();
    if (c == '\n') return true;
    line.push_back(static_cast<char>(c));
    if (line.size() > kMaxLine) return true;
  }
}

ShardFile read_shard(const std::string& path) {
  std::ifstream stream(path);
  if (!stream) {
    throw BadShard(fmt::format("{}: cannot be read", path));
  }
  ShardFile file{.path = path};
  std::string line;
  for (size_t number = 1; read_line(stream, line); ++number) {
    if (line.size() > kMaxLine) {
      throw BadShard(fmt::format("{}:{}: a line of more than {} bytes: not a calrt --jsonl record",
                                 path, number, kMaxLine));
    }
    if (!file.summary.is_null()) {
      throw BadShard(fmt::format("{}:{}: a line after the summary", path, number));
    }
    json record = json::parse(line, nullptr, false);
    if (!record.is_object() || !record.contains("record")) {
      throw BadShard(fmt::format("{}:{}: not a calrt --jsonl record", path, number));
    }
    if (record["record"] == "summary") {
      file.summary = std::move(record);
      continue;
    }
    if (!record.contains("index") || !record["index"].is_number_unsigned()) {
      throw BadShard(fmt::format("{}:{}: a {} record without its \"index\"", path, number,
                                 record["record"].dump()));
    }
    file.records.push_back(std::move(record));
  }
  if (file.summary.is_null()) {
    throw BadShard(fmt::format("{}: no summary line: the shard did not finish", path));
  }
  const json& shard = file.summary.value("shard", json());
  if (!shard.is_object() || !shard.value("count", json()).is_number_unsigned() ||
      !shard.value("index", json()).is_number_unsigned()) {
    throw BadShard(fmt::format("{}: the summary has no \"shard\": not a --shard run", path));
  }
  file.index = shard["index"];
  file.count = shard["count"];
  for (const char* key : {"schema", "tool", "command", "command_line", "result", "counts"}) {
    if (!file.summary.contains(key)) {
      throw BadShard(fmt::format("{}: the summary has no \"{}\"", path, key));
    }
  }
  return file;
}

Verdict worst(Verdict a, Verdict b) {
  if (a == Verdict::error || b == Verdict::error) return Verdict::error;
  if (a == Verdict::fail || b == Verdict::fail) return Verdict::fail;
  return Verdict::pass;
}

std::string merge_text(const std::vector<ShardFile>& files) {
  const ShardFile& first =
      *std::min_element(files.begin(), files.end(),
                        [](const ShardFile& a, const ShardFile& b) { return a.index < b.index; });
  const std::string identity = run_identity(first.summary["command_line"]);
  std::set<uint32_t> seen;
  for (const ShardFile& f : files) {
    if (f.count != first.count) {
      throw BadShard(fmt::format("{}: shard {}/{}, but {} is shard {}/{}", f.path, f.index, f.count,
                                 first.path, first.index, first.count));
    }
    if (!seen.insert(f.index).second) {
      throw BadShard(fmt::format("{}: shard {}/{} given twice", f.path, f.index, f.count));
    }
    for (const char* key : {"schema", "tool", "command"}) {
      if (f.summary[key] != first.summary[key]) {
        throw BadShard(fmt::format("{}: {} {} differs from {} in {}", f.path, key,
                                   f.summary[key].dump(), first.summary[key].dump(), first.path));
      }
    }
    if (run_identity(f.summary["command_line"]) != identity) {
      throw BadShard(fmt::format("{}: not the same run as {}: '{}' against '{}'", f.path,
                                 first.path, run_identity(f.summary["command_line"]), identity));
    }
  }
  for (uint32_t i = 0; i < first.count; ++i) {
    if (!seen.count(i)) {
      throw BadShard(fmt::format("shard {}/{} is missing", i, first.count));
    }
  }

  // Records by their unit's index; a unit's records stay in their file's order.
  std::multimap<uint64_t, const json*> ordered;
  std::map<uint64_t, const ShardFile*> owner;
  for (const ShardFile& f : files) {
    for (const json& record : f.records) {
      const uint64_t index = record["index"];
      const auto [at, inserted] = owner.emplace(index, &f);
      if (!inserted && at->second != &f) {
        throw BadShard(
            fmt::format("{}: unit {} was also run by {}", f.path, index, at->second->path));
      }
      ordered.emplace(index, &record);
    }
  }

  json summary = first.summary;
  summary.erase("shard");
  summary["command_line"] = without_shard(first.summary["command_line"]);
  Verdict result = Verdict::pass;
  json counts = first.summary["counts"];
  for (const char* key : {"total", "passed", "failed", "skipped"}) counts[key] = 0;
  std::string error;
  std::vector<const ShardFile*> by_index;
  for (const ShardFile& f : files) by_index.push_back(&f);
  std::sort(by_index.begin(), by_index.end(),
            [](const ShardFile* a, const ShardFile* b) { return a->index < b->index; });
  for (const ShardFile* f : by_index) {
    result = worst(result, verdict_from(f->summary["result"].get<std::string>()));
    for (const char* key : {"total", "passed", "failed", "skipped"}) {
      counts[key] = counts[key].get<uint64_t>() + f->summary["counts"].value(key, uint64_t{0});
    }
    if (error.empty()) error = f->summary.value("error", "");
  }
  summary["result"] = to_string(result);
  summary["counts"] = counts;
  summary.erase("error");
  if (!error.empty()) summary["error"] = error;

  std::string text;
  auto add = [&text](const json& record) {
    text += record.dump(-1, ' ', false, json::error_handler_t::replace) + '\n';
  };
  for (const auto& [index, record] : ordered) add(*record);
  add(summary);
  return text;
}

}  // namespace

int run_merge(const MergeOptions& options) {
  try {
    if (options.shards.empty()) {
      throw BadShard("give the shards' --jsonl files");
    }
    if (options.out != "-") {
      if (std::string why = check_output_path("--out", options.out); !why.empty()) {
        throw BadShard(why);
      }
    }
    std::vector<ShardFile> files;
    for (const std::string& path : options.shards) files.push_back(read_shard(path));
    const std::string text = merge_text(files);
    if (std::string why = write_text_file(options.out, text); !why.empty()) {
      std::fprintf(stderr, "calrt merge: --out: %s\n", why.c_str());
      return kExitUsage;
    }
    const json summary = json::parse(text.substr(text.rfind('\n', text.size() - 2) + 1));
    std::fprintf(stderr, "calrt merge: %zu shards, %s: %s\n", files.size(),
                 summary["counts"].dump().c_str(), summary["result"].get<std::string>().c_str());
    return summary["result"] == "PASS"   ? kExitPass
           : summary["result"] == "FAIL" ? kExitFail
                                         : kExitUsage;
  } catch (const BadShard& bad) {
    std::fprintf(stderr, "calrt merge: bad input: %s\n", bad.what());
    return kExitUsage;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "calrt merge: internal error: %s\n", error.what());
    return kExitFail;
  }
}

}  // namespace runner
