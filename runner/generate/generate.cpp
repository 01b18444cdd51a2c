#include "runner/generate/generate.hpp"

#include <spdlog/fmt/fmt.h>
#include <nlohmann/json.hpp>

#include <charconv>
#include <cstdio>
#include <variant>

#include "llm/engine.hpp"
#include "llm/host/ranking.hpp"
#include "runner/core/device/device_select.hpp"
#include "runner/core/exit_codes.hpp"

namespace runner {
namespace {

double ms(std::chrono::nanoseconds duration) {
  return std::chrono::duration<double, std::milli>(duration).count();
}

// "1,2,3" into token ids; the error names the option and the piece that is not one.
tl::expected<std::vector<int32_t>, std::string> parse_tokens(const std::string& text) {
  std::vector<int32_t> tokens;
  size_t begin = 0;
  while (begin <= text.size()) {
    const size_t end = std::min(text.find(',', begin), text.size());
    const std::string piece = text.substr(begin, end - begin);
    int32_t value = 0;
    const auto [ptr, ec] = std::from_chars(piece.data(), piece.data() + piece.size(), value);
    if (piece.empty() || ec != std::errc() || ptr != piece.data() + piece.size() || value < 0) {
      return tl::unexpected(fmt::format(
          "--tokens '{}': '{}' is not a token id (a non-negative integer; ids are separated by "
          "commas)",
          text, piece));
    }
    tokens.push_back(value);
    begin = end + 1;
  }
  return tokens;
}

void print(const nlohmann::json& line) {
  std::fputs((line.dump() + "\n").c_str(), stdout);
  std::fflush(stdout);  // a stream: each token as soon as it is there
}

nlohmann::json error_json(const calrt::llm::Error& error) {
  return {{"kind", calrt::llm::to_string(error.kind)},
          {"code", calrt::llm::to_string(error.code)},
          {"retryable", error.retryable()},
          {"message", error.message}};
}

nlohmann::json token_json(const calrt::llm::TokenEvent& t) {
  nlohmann::json line = {{"event", "token"}, {"step", t.step}, {"token", t.token},
                         {"row", t.row},     {"slot", t.slot}, {"ms", ms(t.since_submit)}};
  if (!t.logits.empty()) {
    const std::vector<int32_t> best =
        t.top_ids.empty() ? calrt::llm::top_k(t.logits, 5) : std::vector<int32_t>{};
    nlohmann::json top = nlohmann::json::array();
    for (size_t j = 0; j < std::min<size_t>(5, t.top_ids.empty() ? best.size() : t.top_ids.size());
         ++j) {
      const int32_t id = t.top_ids.empty() ? best[j] : t.top_ids[j];
      const float value = t.top_ids.empty() ? t.logits[static_cast<size_t>(id)] : t.logits[j];
      top.push_back({{"id", id}, {"logit", value}});
    }
    line["top"] = std::move(top);
  }
  return line;
}

nlohmann::json outcome_json(const calrt::llm::Outcome& o) {
  const calrt::llm::RequestTiming& t = o.timing;
  nlohmann::json line = {
      {"event", o.ok() ? "done" : "error"},
      {"tokens", o.tokens},
      {"context_shifts", o.context_shifts},
      {"timing",
       {{"queue_ms", ms(t.queue)},
        {"h2d_ms", ms(t.h2d)},
        {"infer_ms", ms(t.infer)},
        {"d2h_ms", ms(t.d2h)},
        {"convert_ms", ms(t.convert)},
        {"sample_ms", ms(t.sample)},
        {"ttft_ms", ms(t.ttft)},
        {"tpot_ms", ms(t.tpot)},
        {"total_ms", ms(t.total)},
        {"prefill_jobs", t.prefill_jobs},
        {"decode_jobs", t.decode_jobs},
        {"clocks",
         "queue, convert, sample, ttft, tpot, total: host steady clock; h2d, infer, "
         "d2h: device job timestamps"}}},
      {"ledger",
       {{"buffers_mapped", o.ledger.buffers_mapped},
        {"kv_handles", o.ledger.kv_handles},
        {"kv_tokens", o.ledger.kv_tokens},
        {"jobs_in_flight", o.ledger.jobs_in_flight}}}};
  if (o.error) line["error"] = error_json(*o.error);
  return line;
}

// The request as the options describe it, or the bad option named with its value.
tl::expected<calrt::llm::Request, std::string> make_request(const GenerateOptions& o) {
  auto tokens = parse_tokens(o.tokens);
  if (!tokens) return tl::unexpected(tokens.error());
  calrt::llm::Request request;
  request.prompt = std::move(*tokens);
  request.max_new_tokens = o.max_new;
  if (o.sampling == "top-k") {
    request.sampling.method = calrt::llm::SamplingMethod::top_k;
  } else if (o.sampling != "greedy") {
    return tl::unexpected(fmt::format("--sampling '{}': expected greedy or top-k", o.sampling));
  }
  request.sampling.top_k = o.top_k;
  request.sampling.top_p = o.top_p;
  request.sampling.temperature = o.temperature;
  request.sampling.seed = o.seed;
  request.want_logits = o.logits;
  if (o.context_shift_keep) request.context_shift = calrt::llm::ContextShift{*o.context_shift_keep};
  return request;
}

// Opens the runtime and the engine; an exit code when it cannot.
tl::expected<std::unique_ptr<calrt::llm::Engine>, int> open_engine(const GenerateOptions& o) {
  calrt::llm::EngineConfig config;
  try {
    const DeviceSpec spec = parse_device(o.device, o.device_kind, o.device_index, o.device_config);
    config.device = {open_runtime(spec), spec.kind, spec.index, spec.config};
  } catch (const std::exception& error) {
    std::fprintf(stderr, "calrt generate: bad input: --device '%s': %s\n", o.device.c_str(),
                 error.what());
    return tl::unexpected(kExitUsage);
  }
  config.calbin = o.calbin;
  config.service_manifest = o.manifest.value_or(std::filesystem::path());
  config.parallel = o.parallel;
  config.job_timeout = std::chrono::milliseconds(o.timeout_ms);
  config.call_timeout = std::chrono::milliseconds(o.timeout_ms);
  auto engine = calrt::llm::Engine::open(std::move(config));
  if (!engine) {
    const calrt::llm::Error& error = engine.error();
    const bool bad_input = error.code == calrt::llm::ErrorCode::invalid_request;
    std::fprintf(stderr, "calrt generate: %s%s\n", bad_input ? "bad input: " : "",
                 error.to_string().c_str());
    print({{"event", "error"}, {"error", error_json(error)}});
    return tl::unexpected(bad_input ? kExitUsage : kExitFail);
  }
  return std::move(*engine);
}

}  // namespace

int run_generate(const GenerateOptions& o) {
  auto request = make_request(o);
  if (!request) {
    std::fprintf(stderr, "calrt generate: bad input: %s\n", request.error().c_str());
    return kExitUsage;
  }
  try {
    auto engine = open_engine(o);
    if (!engine) return engine.error();
    const calrt::llm::Capabilities& caps = (*engine)->capabilities();
    print({{"event", "start"},
           {"calbin", o.calbin.string()},
           {"n_ctx", caps.n_ctx},
           {"n_batch", caps.n_batch},
           {"vocab", caps.vocab},
           {"prefill_chunk", caps.prefill_chunk},
           {"prompt_tokens", request->prompt.size()}});
    auto id = (*engine)->submit(std::move(*request));
    if (!id) {
      const bool bad = id.error().code == calrt::llm::ErrorCode::invalid_request;
      std::fprintf(stderr, "calrt generate: %s%s\n", bad ? "bad input: --tokens/sampling: " : "",
                   id.error().to_string().c_str());
      print({{"event", "error"}, {"error", error_json(id.error())}});
      return bad ? kExitUsage : kExitFail;
    }
    // The timeout bounds each job; the whole run is bounded by one per token and the prompt.
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(o.timeout_ms) * (o.max_new + 2);
    int exit_code = kExitFail;  // until the outcome says otherwise
    bool answered = false;
    std::vector<calrt::llm::Event> events;
    while (!answered && std::chrono::steady_clock::now() < deadline) {
      (*engine)->poll(deadline - std::chrono::steady_clock::now(), events);
      for (const calrt::llm::Event& event : events) {
        if (const auto* token = std::get_if<calrt::llm::TokenEvent>(&event)) {
          print(token_json(*token));
        } else if (const auto* outcome = std::get_if<calrt::llm::Outcome>(&event)) {
          print(outcome_json(*outcome));
          exit_code = outcome->ok() ? kExitPass : kExitFail;
          answered = true;
        }
      }
      events.clear();
    }
    if (!answered) {
      std::fprintf(stderr, "calrt generate: no outcome within %u ms per token\n", o.timeout_ms);
    }
    return exit_code;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "calrt generate: %s\n", error.what());
    return kExitFail;
  }
}

}  // namespace runner
