#include "runner/bench/bench_session.hpp"

#include <spdlog/fmt/fmt.h>
#include <spdlog/spdlog.h>

#include <vector>

#include "calbin/sha256.hpp"

namespace runner {
namespace {

// The model named exactly `wanted` (--prefill-model/--decode-model), or the calbin's only
// model of `type`.
const calrt::ModelDesc& select_model(const std::vector<calrt::ModelDesc>& models,
                                     const std::string& wanted, calrt::ModelType type) {
  std::vector<const calrt::ModelDesc*> matches;
  std::string names;
  for (const auto& model : models) {
    names += (names.empty() ? "" : ", ") + model.name;
    if (wanted.empty() ? model.type == type : model.name == wanted) {
      matches.push_back(&model);
    }
  }
  if (matches.size() == 1 && matches.front()->type == type) {
    return *matches.front();
  }
  const std::string flag = fmt::format("--{}-model", calrt::to_string(type));
  if (!wanted.empty()) {
    throw BenchUsageError(fmt::format(
        "{} '{}': {} (models: {})", flag, wanted,
        matches.empty() ? "no model has exactly this name"
                        : fmt::format("is a {} model", calrt::to_string(matches.front()->type)),
        names));
  }
  throw BenchUsageError(fmt::format("the calbin has {} {} models (models: {}); choose one with {}",
                                    matches.size(), calrt::to_string(type), names, flag));
}

void check_io(const calrt::CalbinInfo& info, ModelIo& io, calrt::ModelType type) {
  StepResult step;
  check_model_io(info, io, type, step);
  if (!step.passed()) {
    throw std::runtime_error(
        fmt::format("the calbin's {} model does not have the I/O the bench "
                    "drives: {}",
                    calrt::to_string(type), fmt::join(step.failures, "; ")));
  }
}

}  // namespace

void load_bench_inputs(BenchSession& s) {
  const BenchOptions& o = s.options;
  try {
    s.device_spec = parse_device(o.device, o.device_kind, o.device_index, o.device_config);
  } catch (const std::exception& error) {
    throw BenchUsageError(error.what());
  }
  auto manifest = calbin::read_manifest(o.calbin);
  if (!manifest) {
    throw BenchUsageError(manifest.error().to_string());
  }
  s.manifest = std::move(*manifest);
  // The manifest lists every file of the calbin with its SHA-256 (and the device verifies
  // them at Calbin_Create), so its own hash identifies the whole calbin.
  auto hash = calbin::sha256_file(o.calbin / calbin::kManifestFileName);
  if (!hash) {
    throw BenchUsageError(hash.error().to_string());
  }
  s.manifest_sha256 = *hash;
  const calbin::LlmInfo& llm = s.manifest.llm;
  const uint64_t positions = uint64_t{o.prompt_len} + o.gen_len - 1;
  if (llm.context > 0 && positions > llm.context) {
    throw BenchUsageError(fmt::format(
        "--prompt-len {} + --gen-len {} - 1 = {} KV positions exceed the calbin's context {} "
        "({})",
        o.prompt_len, o.gen_len, positions, llm.context,
        (o.calbin / calbin::kManifestFileName).string()));
  }
  if (llm.batch != 1) {
    throw BenchUsageError(fmt::format("{}: llm.batch is {}: the bench drives batch 1 only",
                                      (o.calbin / calbin::kManifestFileName).string(), llm.batch));
  }
  try {
    s.api = open_runtime(s.device_spec);
  } catch (const std::exception& error) {  // LoadError, or a backend this build lacks
    throw BenchUsageError(error.what());
  }
}

void open_bench_device(BenchSession& s) {
  try {
    s.device = open_device(s.api, s.device_spec, s.timeout());
  } catch (const calrt::Error& error) {
    if (error.code() != CALRT_INVALID_ARGUMENT) {
      throw;
    }
    // The runtime rejected what the options asked for (e.g. a config key or value).
    throw BenchUsageError(fmt::format("--device-config '{}' / --device-kind {}: {}",
                                      s.options.device_config, s.options.device_kind,
                                      error.what()));
  }
  s.device_status = s.device.status();
  if (s.device_status.abi_major != CALRT_ABI_MAJOR) {
    throw std::runtime_error(fmt::format("the runtime implements ABI major {}, this runner {}",
                                         s.device_status.abi_major, CALRT_ABI_MAJOR));
  }
  s.calbin = calrt::Calbin::create(s.device, s.options.calbin, s.timeout());
  s.info = s.calbin.info();
  const auto models = s.calbin.models();
  s.prefill.desc = select_model(models, s.options.prefill_model, calrt::ModelType::prefill);
  s.decode.desc = select_model(models, s.options.decode_model, calrt::ModelType::decode);
  if (s.info.batch != 1) {
    throw BenchUsageError(
        fmt::format("the calbin's LLM info says batch {}: the bench drives batch 1", s.info.batch));
  }
  if (s.info.prefill_chunk == 0) {
    throw std::runtime_error("the calbin's LLM info says prefill_chunk 0");
  }
  const uint64_t positions = s.kv_tokens_per_request();
  if (positions > s.info.context) {
    throw BenchUsageError(fmt::format(
        "--prompt-len {} + --gen-len {} - 1 = {} KV positions exceed the calbin's context {}",
        s.options.prompt_len, s.options.gen_len, positions, s.info.context));
  }
  check_io(s.info, s.prefill, calrt::ModelType::prefill);
  check_io(s.info, s.decode, calrt::ModelType::decode);
  const SamplingConfig& sampling = s.options.sampling;
  if (s.decode.ranked() && sampling.method == SamplingMethod::top_k &&
      sampling.top_k > s.decode.top_k) {
    throw BenchUsageError(fmt::format(
        "--top-k {}: decode model {} ranks on the device and gives its best {} ids only",
        sampling.top_k, s.decode.name(), s.decode.top_k));
  }
  s.configured = s.calbin.configure(s.timeout());
  const calrt::KvCapacity kv = s.calbin.kv_capacity();
  const uint64_t needed = positions * s.options.concurrency;
  if (needed > kv.total_tokens) {
    throw BenchUsageError(fmt::format(
        "--concurrency {} x ({} prompt + {} generated - 1) = {} KV positions exceed the "
        "calbin's KV reservation of {} positions",
        s.options.concurrency, s.options.prompt_len, s.options.gen_len, needed, kv.total_tokens));
  }
  spdlog::debug("bench: prefill model {}, decode model {}, chunk {}, vocab {}, KV {} positions",
                s.prefill.name(), s.decode.name(), s.info.prefill_chunk, s.info.vocab,
                kv.total_tokens);
}

}  // namespace runner
