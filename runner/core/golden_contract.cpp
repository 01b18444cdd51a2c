#include "runner/core/golden_contract.hpp"

#include <algorithm>
#include <thread>
#include <vector>

#if CALRT_HAVE_SIMDEV_GEN
#include "simdev/gen/reference/calbin_contract.hpp"
#endif

namespace runner {
namespace {

void drop_rows(calbin::GoldenCase& golden) {
  golden.contract_rows.clear();
  golden.contract_logits.clear();
  golden.contract_probes.clear();
  golden.probe_points = 0;
  golden.probe_width = 0;
}

// Why the calbin's contract cannot be computed here, or empty.
std::string not_computable(const HostInputs& inputs) {
#if CALRT_HAVE_SIMDEV_GEN
  return simdev::gen::contract_unavailable(inputs.manifest);
#else
  (void)inputs;
  return "this build has no simdev generator";
#endif
}

tl::expected<void, std::string> compute(const SmokeOptions& options, HostInputs& inputs,
                                        std::vector<calbin::GoldenCase*>& cases) {
#if CALRT_HAVE_SIMDEV_GEN
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<calbin::GoldenCase> fp32(cases.size());
  if (auto added =
          simdev::gen::add_calbin_references(options.calbin, inputs.manifest, cases, fp32, threads);
      !added) {
    return tl::unexpected("references from the calbin's weights: " + added.error().to_string());
  }
  inputs.calbin_fp32.assign(inputs.golden.cases.size(), calbin::GoldenCase{});
  for (size_t i = 0; i < cases.size(); ++i) {
    inputs.calbin_fp32[static_cast<size_t>(cases[i] - inputs.golden.cases.data())] =
        std::move(fp32[i]);
  }
  return {};
#else
  (void)options, (void)inputs, (void)cases;
  return tl::unexpected(std::string("this build has no simdev generator"));
#endif
}

}  // namespace

tl::expected<ContractSource, std::string> complete_contract_rows(const SmokeOptions& options,
                                                                 HostInputs& inputs) {
  std::vector<calbin::GoldenCase*> selected;
  size_t with_rows = 0;
  for (const size_t i : inputs.case_indices) {
    selected.push_back(&inputs.golden.cases[i]);
    with_rows += selected.back()->contract_rows.empty() ? 0 : 1;
  }
  const std::string& mode = options.contract;
  if (mode == "none") {
    std::for_each(selected.begin(), selected.end(), [](auto* c) { drop_rows(*c); });
    return ContractSource{false, "none (--contract none): the FP32 golden alone"};
  }
  if (with_rows != 0 && with_rows != selected.size()) {
    // Half a reference would hold some cases bit for bit and others not at all.
    return tl::unexpected(inputs.golden_dir.string() +
                          ": some selected cases have contract rows and others not: a golden "
                          "set has them for every case or for none");
  }
  if (mode != "computed" && with_rows == selected.size()) {
    return ContractSource{true, "the golden set"};
  }
  if (mode == "golden") {
    return ContractSource{false, "none: the golden set has no contract rows (--contract golden)"};
  }
  if (const std::string why = not_computable(inputs); !why.empty()) {
    if (mode == "computed") {
      return tl::unexpected("--contract computed: " + options.calbin.string() + ": " + why);
    }
    return ContractSource{false, "none: the golden set has no contract rows, and " + why};
  }
  std::for_each(selected.begin(), selected.end(), [](auto* c) { drop_rows(*c); });
  if (auto computed = compute(options, inputs, selected); !computed) {
    return tl::unexpected(computed.error());
  }
  return ContractSource{true,
                        "computed from the calbin's weights, with the calbin's FP32 model as "
                        "the distance the FP32 gates open to"};
}

}  // namespace runner
