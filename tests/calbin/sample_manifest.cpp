// A two-model manifest with every field set away from its default.
#include "test_util.hpp"

namespace calbin::testing {
namespace {

Model prefill_model() {
  Model model;
  model.name = "qwen3_prefill";
  model.type = ModelType::kPrefill;
  model.metadata_type = "llm_prefill";
  model.inputs = {tensor("tokens", TensorRole::kToken, {1, 256}, Dtype::kInt32, {}, 0x1000),
                  tensor("positions", TensorRole::kPosition, {1, 256}, Dtype::kInt32, {}, 0x2000)};
  model.outputs = {tensor("logits", TensorRole::kLogits, {1, 151936}, Dtype::kBf16,
                          Layout{Layout::Kind::kTiled, 16}, 0x10000)};
  model.csrs = {Csr{"cur_seq_len", 0, 0x40}, Csr{"past_kv_cur_seq_len", 1, 0x44}};
  model.ping_pong = {PingPongSlot{"ping", {0x1000, 0x2000}, {0x10000}},
                     PingPongSlot{"pong", {0x101000, 0x102000}, {0x110000}}};
  model.ping_pong_may_alias = true;
  model.workspace_bytes = uint64_t{3} << 30;
  Op op{"flash_attention", "layers.0.attn", 0, {1, 32, 256, 128}, Dtype::kBf16, 123456789, 4096};
  op.weight_bytes = 1024;
  op.experts = 8;
  op.kv_bytes = 2048;
  op.kv_slots = 256;
  model.ops = {ChipOps{0, {op}}, ChipOps{1, {op, op}}};
  return model;
}

WeightTensor q_proj_shard() {
  WeightTensor weight;
  weight.name = "layers.0.attn.q_proj";
  weight.role = "attn_q";
  weight.layer = 0;
  weight.shape = {4096, 2048};
  weight.dtype = Dtype::kInt8;
  weight.quant = Quant{"w8a8_dynamic", "param_blk0.bin", 8388608, 2048, 0};
  weight.shard = Shard{0, 1, 2, 2048, 4096, 2};
  weight.file = "param_blk1.bin";
  weight.offset = 1024;
  weight.bytes = 2048 * 2048;
  return weight;
}

}  // namespace

Manifest sample_manifest() {
  Manifest m;
  m.calbin_version = "2.3.1";
  m.architecture = "calculet-c2";
  m.runtime_abi = "0.7.6";
  m.chips = 2;
  m.chip_mask = 3;
  m.timing_only = true;
  m.device_memory_required = MemoryAmount{12, "GiB"};
  m.llm = LlmInfo{151936,
                  40960,
                  1,
                  48,
                  2048,
                  32,
                  4,
                  128,
                  768,
                  128,
                  8,
                  512,
                  1e6,
                  1e-5,
                  Dtype::kBf16,
                  Dtype::kInt8,
                  "tensor_parallel",
                  131072};
  m.provenance = Provenance{"simdev gen 0.1", "abc123",       "def456",
                            "calc --compile", "{\"opt\": 3}", std::string(64, 'e')};
  m.files = {FileEntry{"param_blk0.bin", 1000, std::string(64, 'a')},
             FileEntry{"golden/golden.json", 20, std::string(64, 'b')}};
  m.param_blocks = {ParamBlock{"param_blk0", "param_blk0.bin", 3}};
  m.reservations = {Reservation{"params", 0, 0x100000000, MemoryAmount{8, "GiB"}},
                    Reservation{"kv_cache", 1, 0x300000000, MemoryAmount{1920, "MiB"}}};
  m.weights = {q_proj_shard()};
  Model decode = prefill_model();
  decode.name = "qwen3_decode";
  decode.type = ModelType::kDecode;
  decode.metadata_type = "llm_decode";
  m.models = {prefill_model(), decode};
  m.golden = GoldenRef{"golden/golden.json"};
  return m;
}

}  // namespace calbin::testing
