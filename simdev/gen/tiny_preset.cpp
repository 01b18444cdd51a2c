#include "simdev/gen/tiny_preset.hpp"

#include "simdev/gen/functional_calbin.hpp"

namespace simdev::gen {

ModelConfig tiny_config() {
  ModelConfig c;
  c.architecture = "qwen3";
  c.calbin_version_prefix = "tiny";
  c.prefill_model = "qwen3_tiny_prefill_c256";
  c.decode_model = "qwen3_tiny_decode";
  c.runtime_abi = "0.7.6";
  c.layers = 2;
  c.hidden = 128;
  c.q_heads = 4;
  c.kv_heads = 2;
  c.head_dim = 32;
  c.ffn = 256;
  c.vocab = 1000;
  // 4608 = 18 chunks of 256: room for the 4095..4097 golden prompts plus decode steps.
  c.context = 4608;
  c.batch = 1;
  c.prefill_chunk = 256;
  c.chips = 2;
  c.logits_tile_d0 = 16;
  // Larger than the calbin's context on purpose, as in the reference deployment, so the
  // runner must take the minimum.
  c.tokenizer_context = 32768;
  c.rope_theta = 1e6;
  c.rms_eps = 1e-6;
  return c;
}

calbin::Result<calbin::Manifest> build_tiny(const GenOptions& options,
                                            const std::filesystem::path& dir) {
  return build_functional(tiny_config(), options, dir);
}

ModelConfig tiny_gqa_config() {
  ModelConfig c = tiny_config();
  c.calbin_version_prefix = "tiny-gqa";
  c.prefill_model = "qwen3_tiny_gqa_prefill_c128";
  c.decode_model = "qwen3_tiny_gqa_decode";
  c.q_heads = 8;
  c.kv_heads = 4;
  c.head_dim = 16;
  c.prefill_chunk = 128;
  c.logits_tile_d0 = 32;
  return c;
}

calbin::Result<calbin::Manifest> build_tiny_gqa(const GenOptions& options,
                                                const std::filesystem::path& dir) {
  return build_functional(tiny_gqa_config(), options, dir);
}

}  // namespace simdev::gen
