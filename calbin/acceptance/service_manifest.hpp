// The versioned service manifest (YAML): the facts an LLM service relies on about a calbin,
// as stage 10 of the bring-up guide defines them. `check --manifest` compares it with the
// calbin; the adapter reads it at start-up instead of hard-coding names and indices.
//
//   schema: 1
//   architecture: qwen3
//   calbin_version: "..."
//   runtime_abi: 0.7.6
//   context: 40960
//   batch: 1
//   vocab: 151936
//   chip_mask: 3            # optional
//   kv_dtype: bf16          # optional
//   logits_dtype: bf16      # optional
//   decode_top_k: 40        # optional: the decode ranks on the device and gives, per row,
//                           # its K best ids and logits (top_ids, top_logits) instead of the
//                           # full row; tensors.logits then binds the prefill's logits only
//   models: {prefill: exact-prefill-name, decode: exact-decode-name}
//   tensors: {token: inputs[0], position: inputs[1], logits: outputs[0]}
//   csr: {current: cur_seq_len[0], past_current: past_kv_cur_seq_len[0]}
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "calbin/manifest.hpp"
#include "calbin/result.hpp"

namespace calbin {

inline constexpr int kServiceSchemaVersion = 1;

// "inputs[0]" / "outputs[2]": a tensor of a model by direction and index.
struct TensorRef {
  bool output = false;
  uint32_t index = 0;
};

// "cur_seq_len[0]": a CSR by name and element index. A CSR holds one value per sequence of the
// batch, so `check` wants the element below llm.batch.
struct CsrRef {
  std::string name;
  uint32_t index = 0;
};

struct ServiceManifest {
  int schema = kServiceSchemaVersion;
  std::string architecture;
  std::string calbin_version;
  std::string runtime_abi;
  uint32_t context = 0;
  uint32_t batch = 0;
  uint32_t vocab = 0;
  std::optional<uint32_t> chip_mask;
  std::optional<Dtype> kv_dtype;
  std::optional<Dtype> logits_dtype;
  std::optional<uint32_t> decode_top_k;
  std::string prefill_model;
  std::string decode_model;
  TensorRef token;
  TensorRef position;
  TensorRef logits;
  CsrRef current;
  CsrRef past_current;
};

// Parses YAML text; `file_label` names the file in errors, which also name the key and value.
Result<ServiceManifest> parse_service_manifest(std::string_view yaml_text,
                                               std::string_view file_label);
Result<ServiceManifest> read_service_manifest(const std::filesystem::path& path);

}  // namespace calbin
