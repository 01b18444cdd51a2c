#include "runner/core/report/chrome_trace.hpp"

#include <cstdio>

namespace runner {

std::string format_us(int64_t ns) {
  // Work on the magnitude as unsigned so that INT64_MIN has a magnitude too.
  const bool negative = ns < 0;
  const uint64_t magnitude = negative ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  char text[32];
  std::snprintf(text, sizeof(text), "%s%llu.%03llu", negative ? "-" : "",
                static_cast<unsigned long long>(magnitude / 1000),
                static_cast<unsigned long long>(magnitude % 1000));
  return text;
}

std::string json_string(std::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", static_cast<unsigned>(c));
          out += escaped;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

ChromeTrace::Arg ChromeTrace::arg(std::string key, int64_t value) {
  return {std::move(key), std::to_string(value)};
}

ChromeTrace::Arg ChromeTrace::arg(std::string key, uint64_t value) {
  return {std::move(key), std::to_string(value)};
}

ChromeTrace::Arg ChromeTrace::arg(std::string key, std::string_view value) {
  return {std::move(key), json_string(value)};
}

ChromeTrace::Arg ChromeTrace::arg(std::string key, bool value) {
  return {std::move(key), value ? "true" : "false"};
}

void ChromeTrace::process(int pid, std::string_view name, int sort_index) {
  events_.push_back("{\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
                    ",\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":" + json_string(name) +
                    "}}");
  events_.push_back("{\"ph\":\"M\",\"pid\":" + std::to_string(pid) +
                    ",\"tid\":0,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":" +
                    std::to_string(sort_index) + "}}");
}

void ChromeTrace::thread(int pid, int tid, std::string_view name, int sort_index) {
  const std::string where = "\"pid\":" + std::to_string(pid) + ",\"tid\":" + std::to_string(tid);
  events_.push_back("{\"ph\":\"M\"," + where +
                    ",\"name\":\"thread_name\",\"args\":{\"name\":" + json_string(name) + "}}");
  events_.push_back("{\"ph\":\"M\"," + where +
                    ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":" +
                    std::to_string(sort_index) + "}}");
}

void ChromeTrace::complete(int pid, int tid, std::string_view name, std::string_view category,
                           int64_t begin_ns, int64_t duration_ns, const std::vector<Arg>& args) {
  std::string event = "{\"ph\":\"X\",\"pid\":" + std::to_string(pid) +
                      ",\"tid\":" + std::to_string(tid) + ",\"name\":" + json_string(name) +
                      ",\"cat\":" + json_string(category) + ",\"ts\":" + format_us(begin_ns) +
                      ",\"dur\":" + format_us(duration_ns);
  if (!args.empty()) {
    event += ",\"args\":{";
    for (size_t i = 0; i < args.size(); ++i) {
      event += (i ? "," : "") + json_string(args[i].key) + ":" + args[i].json;
    }
    event += "}";
  }
  events_.push_back(event + "}");
  ++complete_events_;
}

std::string ChromeTrace::to_json() const {
  std::string out = "{\"displayTimeUnit\":\"ns\",\"traceEvents\":[\n";
  for (size_t i = 0; i < events_.size(); ++i) {
    out += events_[i];
    out += i + 1 < events_.size() ? ",\n" : "\n";
  }
  return out + "]}\n";
}

}  // namespace runner
