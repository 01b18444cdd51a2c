#include "runner/core/report/shard.hpp"

#include <charconv>

namespace runner {
namespace {

bool parse_number(std::string_view text, uint32_t& out) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), out);
  return error == std::errc() && end == text.data() + text.size() && !text.empty();
}

}  // namespace

std::optional<Shard> parse_shard(const std::string& text, std::string* why) {
  const size_t slash = text.find('/');
  Shard shard;
  if (slash == std::string::npos ||
      !parse_number(std::string_view(text).substr(0, slash), shard.index) ||
      !parse_number(std::string_view(text).substr(slash + 1), shard.count)) {
    if (why) *why = "--shard '" + text + "': expected I/N, e.g. 0/4";
    return std::nullopt;
  }
  if (shard.count == 0 || shard.count > kMaxShards || shard.index >= shard.count) {
    if (why) {
      *why = "--shard '" + text + "': need 0 <= I < N <= " + std::to_string(kMaxShards);
    }
    return std::nullopt;
  }
  return shard;
}

CLI::Option* add_shard_option(CLI::App& app, std::optional<Shard>& shard, const char* units) {
  return app
      .add_option_function<std::string>(
          "--shard", [&shard](const std::string& text) { shard = parse_shard(text); },
          std::string("I/N: run only the ") + units +
              " k with k mod N = I (one machine's part; `calrt merge` joins the --jsonl outputs)")
      ->check(CLI::Validator(
          [](const std::string& text) {
            std::string why;
            return parse_shard(text, &why) ? std::string() : why;
          },
          "I/N"));
}

nlohmann::json to_json(const Shard& shard) {
  return {{"index", shard.index}, {"count", shard.count}};
}

}  // namespace runner
