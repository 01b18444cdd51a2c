#include "runner/tools/inspect.hpp"

#include <fmt/format.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "calbin/manifest.hpp"
#include "runner/core/exit_codes.hpp"
#include "runner/core/report/report.hpp"
#include "runner/tools/inventory.hpp"

namespace runner {
namespace {

using nlohmann::json;

std::string shape_text(const std::vector<int64_t>& shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

std::string layout_text(const calbin::Layout& layout) {
  return layout.kind == calbin::Layout::Kind::kTiled ? fmt::format("tiled(d0={})", layout.tile_d0)
                                                     : "row_major";
}

json tensor_json(const calbin::TensorDesc& t) {
  return {{"name", t.name},
          {"role", std::string(calbin::to_string(t.role))},
          {"shape", t.shape},
          {"dtype", std::string(calbin::to_string(t.dtype))},
          {"layout", layout_text(t.layout)},
          {"bytes", t.bytes},
          {"address", t.address},
          {"chip_mask", t.chip_mask}};
}

void print_header(const calbin::Manifest& m, json& doc) {
  const calbin::LlmInfo& llm = m.llm;
  std::printf("calbin %s  architecture %s  runtime_abi %s  schema %d  chips %u (mask 0x%x)%s\n",
              m.calbin_version.c_str(), m.architecture.c_str(), m.runtime_abi.c_str(), m.schema,
              m.chips, m.chip_mask, m.timing_only ? "  timing-only" : "");
  std::printf("provenance: %s; compiler %s; kernels %s; onnx %s\n", m.provenance.generator.c_str(),
              m.provenance.compiler_commit.c_str(), m.provenance.kernel_commit.c_str(),
              m.provenance.input_onnx_sha256.c_str());
  std::printf(
      "llm: vocab %u  context %u  batch %u  layers %u  hidden %u  heads %u/%u x %u  ffn %u  "
      "experts %u/%u  prefill chunk %u  K/V %s/%s  %s\n",
      llm.vocab, llm.context, llm.batch, llm.layers, llm.hidden, llm.q_heads, llm.kv_heads,
      llm.head_dim, llm.ffn, llm.active_experts, llm.experts, llm.prefill_chunk,
      std::string(calbin::to_string(llm.k_dtype)).c_str(),
      std::string(calbin::to_string(llm.v_dtype)).c_str(), llm.partition.c_str());
  std::printf("device_memory_required: %llu %s per chip\n",
              static_cast<unsigned long long>(m.device_memory_required.value),
              m.device_memory_required.unit.c_str());
  doc["calbin_version"] = m.calbin_version;
  doc["architecture"] = m.architecture;
  doc["runtime_abi"] = m.runtime_abi;
  doc["chips"] = m.chips;
  doc["timing_only"] = m.timing_only;
  doc["llm"] = {{"vocab", llm.vocab},       {"context", llm.context},
                {"batch", llm.batch},       {"layers", llm.layers},
                {"kv_heads", llm.kv_heads}, {"head_dim", llm.head_dim},
                {"experts", llm.experts},   {"active_experts", llm.active_experts}};
  doc["provenance"] = {{"generator", m.provenance.generator},
                       {"compiler_commit", m.provenance.compiler_commit},
                       {"kernel_commit", m.provenance.kernel_commit},
                       {"command", m.provenance.command},
                       {"input_onnx_sha256", m.provenance.input_onnx_sha256}};
}

void print_tensors(const char* dir, const std::vector<calbin::TensorDesc>& list, json& out) {
  for (size_t i = 0; i < list.size(); ++i) {
    const calbin::TensorDesc& t = list[i];
    std::printf("    %-3s %zu %-12s %-10s %-5s %-14s %-13s %10llu B  @0x%llx  chips 0x%x\n", dir, i,
                t.name.c_str(), std::string(calbin::to_string(t.role)).c_str(),
                std::string(calbin::to_string(t.dtype)).c_str(), shape_text(t.shape).c_str(),
                layout_text(t.layout).c_str(), static_cast<unsigned long long>(t.bytes),
                static_cast<unsigned long long>(t.address), t.chip_mask);
    out.push_back(tensor_json(t));
  }
}

void print_inventory(const calbin::Model& model, json& out) {
  std::printf("    %-22s %9s %14s %14s\n", "op type", "per chip", "GFLOP (all)", "MiB (all)");
  for (const auto& [type, t] : op_inventory(model)) {
    std::printf("    %-22s %9llu %14.3f %14.3f%s\n", type.c_str(),
                static_cast<unsigned long long>(t.count_per_chip),
                static_cast<double>(t.flops) / 1e9, mib(t.bytes),
                t.chips_differ ? "  (chips differ)" : "");
    out[type] = {{"count_per_chip", t.count_per_chip},
                 {"flops", t.flops},
                 {"bytes", t.bytes},
                 {"chips_differ", t.chips_differ}};
  }
}

void print_model(const calbin::Model& model, json& out) {
  std::printf("\nmodel %s (%s, metadata %s, workspace %.2f MiB)\n", model.name.c_str(),
              std::string(calbin::to_string(model.type)).c_str(), model.metadata_type.c_str(),
              mib(model.workspace_bytes));
  json inputs = json::array(), outputs = json::array(), inventory = json::object();
  print_tensors("in", model.inputs, inputs);
  print_tensors("out", model.outputs, outputs);
  json csrs = json::array();
  for (const calbin::Csr& csr : model.csrs) {
    std::printf("    csr %u %s @0x%llx\n", csr.index, csr.name.c_str(),
                static_cast<unsigned long long>(csr.address));
    csrs.push_back({{"index", csr.index}, {"name", csr.name}, {"address", csr.address}});
  }
  for (const calbin::PingPongSlot& slot : model.ping_pong) {
    std::printf("    %s: in [%s] out [%s]\n", slot.slot.c_str(),
                fmt::format("{:#x}", fmt::join(slot.input_addresses, ", ")).c_str(),
                fmt::format("{:#x}", fmt::join(slot.output_addresses, ", ")).c_str());
  }
  print_inventory(model, inventory);
  out.push_back({{"name", model.name},
                 {"type", std::string(calbin::to_string(model.type))},
                 {"metadata_type", model.metadata_type},
                 {"inputs", inputs},
                 {"outputs", outputs},
                 {"csrs", csrs},
                 {"ops", inventory}});
}

void print_memory_map(const calbin::Manifest& m, uint64_t usable, json& out) {
  const char* names[] = {"params", "kv_cache", "workspace", "io", "command", "guard"};
  std::printf("\nmemory map (MiB per chip, of %.0f MiB usable)\n  chip", mib(usable));
  for (const char* name : names) {
    std::printf(" %11s", name);
  }
  std::printf(" %11s\n", "free");
  for (uint32_t chip = 0; chip < m.chips; ++chip) {
    uint64_t used = 0;
    json row = {{"chip", chip}};
    std::printf("  %4u", chip);
    for (const char* name : names) {
      const calbin::Reservation* r = m.find_reservation(name, chip);
      const uint64_t bytes = r ? r->size.bytes().value_or(0) : 0;
      used += bytes;
      row[name] = bytes;
      std::printf(" %11.3f", mib(bytes));
    }
    const double free_mib = mib(usable) - mib(used);
    row["free"] = usable > used ? usable - used : 0;
    std::printf(" %11.3f\n", free_mib);
    out.push_back(row);
  }
}

}  // namespace

int run_inspect(const InspectOptions& options) {
  if (!options.json.empty()) {
    if (std::string problem = check_output_path("--json", options.json, options.calbin);
        !problem.empty()) {
      std::fprintf(stderr, "calrt inspect: %s\n", problem.c_str());
      return kExitUsage;
    }
  }
  auto manifest = calbin::read_manifest(options.calbin);
  if (!manifest) {
    std::fprintf(stderr, "calrt inspect: %s\n", manifest.error().to_string().c_str());
    return kExitUsage;
  }
  // Nothing is judged: a manifest that reads is a PASS, and the models are what was counted.
  json doc = to_json(Envelope{.schema = "calrt-inspect/1",
                              .command = "inspect",
                              .result = Verdict::pass,
                              .counts = {.unit = "model", .passed = manifest->models.size()}});
  doc["calbin"] = options.calbin.string();
  print_header(*manifest, doc);
  json models = json::array();
  for (const calbin::Model& model : manifest->models) {
    print_model(model, models);
  }
  doc["models"] = models;
  json memory = json::array();
  const auto usable =
      static_cast<uint64_t>(options.usable_gib_per_chip * static_cast<double>(uint64_t{1} << 30));
  print_memory_map(*manifest, usable, memory);
  doc["memory_map"] = memory;
  if (!options.json.empty()) {
    if (std::string error = write_json_file(options.json, doc); !error.empty()) {
      std::fprintf(stderr, "calrt inspect: %s\n", error.c_str());
      return kExitUsage;
    }
  }
  return kExitPass;
}

}  // namespace runner
