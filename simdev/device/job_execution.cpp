// Device: what a job does when it starts on the device. CSRs and inputs are honoured as the
// hardware does: checked against the model and the KV handle, never corrected.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "calbin/bf16.hpp"
#include "calbin/layout.hpp"
#include "simdev/device/device.hpp"
#include "simdev/device/model/executor.hpp"
#include "simdev/device/timing/cost_model.hpp"

namespace simdev {
namespace {

struct StepPlan {
  uint64_t cur = 1;    // cur_seq_len
  uint64_t past = 0;   // past_kv_cur_seq_len
  uint64_t chunk = 1;  // tokens one submission of this model can carry
};

uint64_t element_count(const calbin::TensorDesc& desc) {
  uint64_t count = 1;
  for (int64_t dim : desc.shape) {
    count *= static_cast<uint64_t>(std::max<int64_t>(dim, 0));
  }
  return count;
}

std::optional<size_t> find_role(const std::vector<calbin::TensorDesc>& tensors,
                                calbin::TensorRole role) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].role == role) {
      return i;
    }
  }
  return std::nullopt;
}

// A CSR's value by name; the conventional index when the calbin does not name it.
std::pair<uint64_t, std::string> csr(const calbin::Model& model,
                                     const std::vector<uint64_t>& values, const char* name,
                                     uint32_t fallback_index) {
  for (size_t i = 0; i < model.csrs.size() && i < values.size(); ++i) {
    if (model.csrs[i].name == name) {
      return {values[i], std::string(name) + " (index " + std::to_string(i) + ")"};
    }
  }
  const uint64_t value = fallback_index < values.size() ? values[fallback_index] : 0;
  return {value, std::string(name) + " (index " + std::to_string(fallback_index) + ")"};
}

// Tokens one submission of the model carries: a decode model's rows (calrt.h, Kv_Apply),
// the token input's length else.
uint64_t chunk_of(const calbin::Manifest& manifest, const calbin::Model& model) {
  if (model.type == calbin::ModelType::kDecode) {
    return decode_rows(manifest, model);
  }
  const auto token = find_role(model.inputs, calbin::TensorRole::kToken);
  return std::max<uint64_t>(
      token ? element_count(model.inputs[*token]) : manifest.llm.prefill_chunk, 1);
}

// A batch decode row: its token at `position`, over the first `position` KV positions of
// its own handle.
struct RowPlan {
  KvHandle* kv = nullptr;
  int32_t token = 0;
  int32_t position = 0;
};

Expected<StepPlan> plan_step(const calbin::Manifest& manifest, const calbin::Model& model,
                             const std::vector<uint64_t>& csrs, const KvHandle& kv) {
  StepPlan plan;
  const auto [cur, cur_label] = csr(model, csrs, "cur_seq_len", 0);
  const auto [past, past_label] = csr(model, csrs, "past_kv_cur_seq_len", 1);
  plan.cur = cur;
  plan.past = past;
  plan.chunk = chunk_of(manifest, model);
  if (cur < 1 || cur > plan.chunk) {
    return fail(CALRT_OUT_OF_RANGE, "CSR " + cur_label + " = " + std::to_string(cur) +
                                        " is outside [1, " + std::to_string(plan.chunk) + "] for " +
                                        std::string(calbin::to_string(model.type)) + " model \"" +
                                        model.name + "\"");
  }
  if (past > kv.range.tokens || cur > kv.range.tokens - past) {
    return fail(CALRT_OUT_OF_RANGE, "CSR " + past_label + " = " + std::to_string(past) +
                                        " + cur_seq_len " + std::to_string(cur) +
                                        " exceeds the capacity " + std::to_string(kv.range.tokens) +
                                        " of kv handle #" + std::to_string(kv.serial));
  }
  return plan;
}

Expected<std::vector<int32_t>> read_int32(const calbin::Model& model, const TensorBytes& input,
                                          calbin::TensorRole role, const char* what,
                                          uint64_t count) {
  const auto index = find_role(model.inputs, role);
  if (!index) {
    return fail(CALRT_CALBIN_INVALID, "model \"" + model.name + "\" has no " + what + " input");
  }
  const calbin::TensorDesc& desc = model.inputs[*index];
  const auto& bytes = input[*index];
  if (desc.dtype != calbin::Dtype::kInt32 || bytes.size() < count * sizeof(int32_t)) {
    return fail(CALRT_UNIMPLEMENTED,
                "model \"" + model.name + "\" input \"" + desc.name + "\": the simulator reads " +
                    what + " as int32 with at least " + std::to_string(count) + " elements");
  }
  std::vector<int32_t> values(count);
  std::memcpy(values.data(), bytes.data(), count * sizeof(int32_t));
  return values;
}

// Row r of `logits` ranked on the device into row r of the top-k outputs (ids best first,
// equal values in increasing id order; calrt.h, CALRT_ROLE_TOP_IDS); the rows after them
// stay zero. The ranking is of the BF16 values the full row would have carried, so the ids
// are those a host ranking of that row picks.
Status write_top_k(const calbin::Model& model, TensorBytes& output,
                   const std::vector<std::vector<float>>& logits, uint32_t chips,
                   NumericsMutant mutant) {
  const auto ids_index = find_role(model.outputs, calbin::TensorRole::kTopIds);
  const auto values_index = find_role(model.outputs, calbin::TensorRole::kTopLogits);
  const auto ids_desc = ids_index ? &model.outputs[*ids_index] : nullptr;
  const auto values_desc = values_index ? &model.outputs[*values_index] : nullptr;
  const uint64_t k = ids_desc && !ids_desc->shape.empty() ? ids_desc->shape.back() : 0;
  const uint64_t rows = k == 0 ? 0 : element_count(*ids_desc) / k;
  const uint64_t width = logits.empty() ? 0 : logits.front().size();
  if (!ids_desc || !values_desc || ids_desc->dtype != calbin::Dtype::kInt32 ||
      values_desc->dtype != calbin::Dtype::kBf16 || values_desc->shape != ids_desc->shape ||
      ids_desc->layout.kind != calbin::Layout::Kind::kRowMajor ||
      values_desc->layout.kind != calbin::Layout::Kind::kRowMajor || k == 0 || k > width ||
      rows < logits.size() || output[*ids_index].size() < rows * k * sizeof(int32_t) ||
      output[*values_index].size() < rows * k * sizeof(uint16_t)) {
    return fail(CALRT_UNIMPLEMENTED, "model \"" + model.name +
                                         "\": the simulator writes a ranked decode as top_ids "
                                         "int32 and top_logits bf16, both row-major [" +
                                         std::to_string(logits.size()) +
                                         ", K] with 1 <= K <= " + std::to_string(width));
  }
  const uint64_t slice = chips > 0 ? width / chips : width;
  std::vector<uint16_t> row(width);
  std::vector<int32_t> order(width);
  for (size_t r = 0; r < logits.size(); ++r) {
    for (size_t i = 0; i < width; ++i) row[i] = calbin::f32_to_bf16(logits[r][i]);
    for (size_t i = 0; i < width; ++i) order[i] = static_cast<int32_t>(i);
    // The mutant merges chip 0's candidates alone (k <= slice: the generator's check).
    const size_t ranked = mutant == NumericsMutant::top_k_one_chip && k <= slice ? slice : width;
    // NaN ranks below every number, so a broken row still yields K distinct ids.
    const auto better = [&](int32_t a, int32_t b) {
      const float va = calbin::bf16_to_f32(row[static_cast<size_t>(a)]);
      const float vb = calbin::bf16_to_f32(row[static_cast<size_t>(b)]);
      const bool a_nan = std::isnan(va), b_nan = std::isnan(vb);
      if (a_nan != b_nan) return b_nan;
      if (!a_nan && va != vb) return va > vb;
      return a < b;
    };
    std::partial_sort(order.begin(), order.begin() + static_cast<ptrdiff_t>(k),
                      order.begin() + static_cast<ptrdiff_t>(ranked), better);
    std::vector<int32_t> ids(order.begin(), order.begin() + static_cast<ptrdiff_t>(k));
    std::vector<uint16_t> values(k);
    for (size_t j = 0; j < k; ++j) {
      values[j] = row[static_cast<size_t>(ids[j])];
      if (mutant == NumericsMutant::top_k_local_ids && slice > 0) {
        ids[j] = static_cast<int32_t>(static_cast<uint64_t>(ids[j]) % slice);
      }
    }
    std::memcpy(output[*ids_index].data() + r * k * sizeof(int32_t), ids.data(),
                k * sizeof(int32_t));
    std::memcpy(output[*values_index].data() + r * k * sizeof(uint16_t), values.data(),
                k * sizeof(uint16_t));
  }
  return {};
}

// Row r of `logits` into row r of the logits output (or of the top-k outputs, for a decode
// that ranks on the device); the rows after them stay zero.
Status write_logits(const calbin::Model& model, TensorBytes& output,
                    const std::vector<std::vector<float>>& logits, uint32_t chips,
                    NumericsMutant mutant) {
  const auto index = find_role(model.outputs, calbin::TensorRole::kLogits);
  if (!index && find_role(model.outputs, calbin::TensorRole::kTopIds)) {
    return write_top_k(model, output, logits, chips, mutant);
  }
  if (!index) {
    return fail(CALRT_CALBIN_INVALID, "model \"" + model.name + "\" has no logits output");
  }
  const calbin::TensorDesc& desc = model.outputs[*index];
  const uint64_t cols = desc.shape.empty() ? 0 : static_cast<uint64_t>(desc.shape.back());
  const uint64_t rows = cols == 0 ? 0 : element_count(desc) / cols;
  const uint32_t d0 = desc.layout.kind == calbin::Layout::Kind::kTiled ? desc.layout.tile_d0 : 0;
  const uint64_t physical = d0 == 0 ? rows * cols : calbin::tiled_element_count(rows, cols, d0);
  auto& bytes = output[*index];
  const uint64_t width = logits.empty() ? 0 : logits.front().size();
  if (desc.dtype != calbin::Dtype::kBf16 || rows < logits.size() || cols != width ||
      bytes.size() < physical * sizeof(uint16_t)) {
    return fail(CALRT_UNIMPLEMENTED, "model \"" + model.name + "\" output \"" + desc.name +
                                         "\": the simulator writes logits as bf16 [" +
                                         std::to_string(logits.size()) + ", " +
                                         std::to_string(width) + "]");
  }
  std::vector<uint16_t> logical(rows * cols, 0);
  for (size_t r = 0; r < logits.size(); ++r) {
    for (size_t i = 0; i < cols; ++i) {
      logical[r * cols + i] = calbin::f32_to_bf16(logits[r][i]);
    }
  }
  std::vector<uint16_t> stored(physical, 0);
  calbin::to_physical(logical.data(), stored.data(), rows, cols, d0);
  std::memcpy(bytes.data(), stored.data(), stored.size() * sizeof(uint16_t));
  return {};
}

Status run_functional(CalbinImage& image, const calbin::Model& model, const TensorBytes& input,
                      TensorBytes& output, KvHandle& kv, const StepPlan& plan,
                      NumericsMutant mutant, std::vector<float>& probes) {
  auto tokens = read_int32(model, input, calbin::TensorRole::kToken, "tokens", plan.cur);
  if (!tokens) {
    return tl::unexpected(tokens.error());
  }
  auto positions = read_int32(model, input, calbin::TensorRole::kPosition, "positions", plan.cur);
  if (!positions) {
    return tl::unexpected(positions.error());
  }
  if (auto valid = validate_tokens(*tokens, image.dims->vocab); !valid) {
    return valid;
  }
  kv.store.reserve_slots(plan.past + plan.cur);
  const StepRequest request{*tokens, *positions, plan.past, mutant};
  const std::vector<float> logits = run_step(*image.dims, image.weights, kv.store, image.scratch,
                                             *image.workers, request, &probes);
  return write_logits(model, output, {logits}, image.manifest.chips, mutant);
}

// A batch decode: each row is a one-token step of its own sequence, so a row's logits are
// what a batch-1 decode of that sequence gives, bit for bit. The probes are row 0's.
Status run_rows(CalbinImage& image, const calbin::Model& model, TensorBytes& output,
                const std::vector<RowPlan>& rows, NumericsMutant mutant,
                std::vector<float>& probes) {
  std::vector<int32_t> tokens;
  for (const RowPlan& row : rows) tokens.push_back(row.token);
  if (auto valid = validate_tokens(tokens, image.dims->vocab); !valid) {
    return valid;
  }
  std::vector<std::vector<float>> logits;
  for (size_t r = 0; r < rows.size(); ++r) {
    const RowPlan& row = rows[r];
    const auto past = static_cast<size_t>(row.position);
    row.kv->store.reserve_slots(past + 1);
    const StepRequest request{std::span<const int32_t>(&row.token, 1),
                              std::span<const int32_t>(&row.position, 1), past, mutant};
    logits.push_back(run_step(*image.dims, image.weights, row.kv->store, image.scratch,
                              *image.workers, request, r == 0 ? &probes : nullptr));
  }
  if (mutant == NumericsMutant::batch_rows_rotated) {
    std::rotate(logits.begin(), logits.end() - 1, logits.end());
  }
  if (mutant == NumericsMutant::batch_pads_kept && !logits.empty()) {
    auto index = find_role(model.outputs, calbin::TensorRole::kLogits);
    if (!index) index = find_role(model.outputs, calbin::TensorRole::kTopIds);
    if (index && !model.outputs[*index].shape.empty()) {
      const auto batch = static_cast<size_t>(model.outputs[*index].shape.front());
      const std::vector<float> last = logits.back();  // resize must not read from itself
      if (batch > logits.size()) logits.resize(batch, last);
    }
  }
  return write_logits(model, output, logits, image.manifest.chips, mutant);
}

Expected<std::vector<RowPlan>> plan_rows(const calbin::Manifest& manifest,
                                         const calbin::Model& model,
                                         const std::vector<uint64_t>& csrs,
                                         const TensorBytes& input,
                                         const std::vector<KvHandle*>& kvs) {
  const uint64_t batch = decode_rows(manifest, model);
  const auto [live, live_label] = csr(model, csrs, "cur_seq_len", 0);
  if (live < 1 || live > batch || live != kvs.size()) {
    return fail(CALRT_OUT_OF_RANGE, "CSR " + live_label + " = " + std::to_string(live) +
                                        " is outside [1, " + std::to_string(batch) +
                                        "] rows of batch decode model \"" + model.name + "\"");
  }
  auto tokens = read_int32(model, input, calbin::TensorRole::kToken, "tokens", live);
  if (!tokens) return tl::unexpected(tokens.error());
  auto positions = read_int32(model, input, calbin::TensorRole::kPosition, "positions", live);
  if (!positions) return tl::unexpected(positions.error());
  std::vector<RowPlan> rows;
  for (size_t r = 0; r < live; ++r) {
    const int32_t position = (*positions)[r];
    const KvHandle& kv = *kvs[r];
    if (position < 0 || static_cast<uint64_t>(position) >= kv.range.tokens) {
      return fail(CALRT_OUT_OF_RANGE, "row " + std::to_string(r) + ": position " +
                                          std::to_string(position) + " is outside the capacity " +
                                          std::to_string(kv.range.tokens) + " of kv handle #" +
                                          std::to_string(kv.serial));
    }
    rows.push_back({kvs[r], (*tokens)[r], position});
  }
  return rows;
}

}  // namespace

uint64_t decode_rows(const calbin::Manifest& manifest, const calbin::Model& model) {
  return model.type == calbin::ModelType::kDecode ? std::max<uint64_t>(manifest.llm.batch, 1) : 1;
}

uint64_t live_rows(const calbin::Manifest& manifest, const calbin::Model& model,
                   const std::vector<uint64_t>& csrs) {
  const uint64_t batch = decode_rows(manifest, model);
  return batch > 1 ? std::clamp<uint64_t>(csr(model, csrs, "cur_seq_len", 0).first, 1, batch) : 1;
}

JobShape job_shape(const calbin::Manifest& manifest, const calbin::Model& model,
                   const std::vector<uint64_t>& csrs, const TensorBytes& input) {
  // Unvalidated: the shape only prices the job; begin_compute() rejects bad CSRs.
  const uint64_t cur = csr(model, csrs, "cur_seq_len", 0).first;
  uint64_t past = csr(model, csrs, "past_kv_cur_seq_len", 1).first;
  if (decode_rows(manifest, model) > 1) {
    // A batch row's past is its position; the rows are priced at their mean, rounded up.
    const uint64_t live = live_rows(manifest, model, csrs);
    auto positions = read_int32(model, input, calbin::TensorRole::kPosition, "positions", live);
    uint64_t sum = 0;
    for (const int32_t p : positions ? *positions : std::vector<int32_t>{}) {
      sum += static_cast<uint64_t>(std::max(p, 0));
    }
    past = (sum + live - 1) / live;
  }
  return job_shape(manifest, model, cur, past);
}

JobShape job_shape(const calbin::Manifest& manifest, const calbin::Model& model, uint64_t cur,
                   uint64_t past) {
  const uint64_t chunk = chunk_of(manifest, model);
  const uint64_t tokens = std::clamp<uint64_t>(cur, 1, chunk);
  const uint64_t rows = decode_rows(manifest, model) > 1 ? tokens : 1;
  return JobShape{tokens, chunk, std::min<uint64_t>(past, 1u << 30), rows};
}

Status Device::begin_compute(Job& job) {
  CalbinImage& image = *calbins_.find(job.calbin);
  const calbin::Model& model = image.manifest.models[job.model_index];
  job.staged_outputs.clear();
  job.probes.clear();
  job.probe_width = 0;
  for (const auto& tensor : job.output_at_submit) {
    job.staged_outputs.emplace_back(tensor.size(), uint8_t{0});
  }
  std::vector<KvHandle*> kvs;
  for (const ObjectId id : job.kv) {
    if (KvHandle* kv = kvs_.find(id)) kvs.push_back(kv);
  }
  // kv_update models have no documented functional semantics yet: timing only.
  if (kvs.empty() || kvs.size() != job.kv.size() || model.type == calbin::ModelType::kKvUpdate) {
    return {};
  }
  if (decode_rows(image.manifest, model) > 1) {
    auto rows = plan_rows(image.manifest, model, job.csrs, job.input_at_submit, kvs);
    if (!rows) {
      return tl::unexpected(rows.error());
    }
    if (image.functional()) {
      if (auto ran = run_rows(image, model, job.staged_outputs, *rows, config_.numerics_mutant,
                              job.probes);
          !ran) {
        return ran;
      }
      job.probe_width = image.dims->hidden;
    }
    for (const RowPlan& row : *rows) {
      row.kv->filled_tokens =
          std::max<uint64_t>(row.kv->filled_tokens, static_cast<uint64_t>(row.position) + 1);
    }
    return {};
  }
  KvHandle* kv = kvs.front();
  auto plan = plan_step(image.manifest, model, job.csrs, *kv);
  if (!plan) {
    return tl::unexpected(plan.error());
  }
  if (image.functional()) {
    if (auto ran = run_functional(image, model, job.input_at_submit, job.staged_outputs, *kv, *plan,
                                  config_.numerics_mutant, job.probes);
        !ran) {
      return ran;
    }
    job.probe_width = image.dims->hidden;
  }
  kv->filled_tokens = std::max(kv->filled_tokens, plan->past + plan->cur);
  return {};
}

}  // namespace simdev
