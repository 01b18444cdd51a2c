// The calbin manifest: the in-memory form of a calbin directory's manifest.json.
//
// The format itself is documented in calbin/FORMAT.md; this header is its C++ shape. The
// reader checks structure (types, required fields, known enums, sizes that agree with
// shapes, bounded counts); the semantic acceptance checks of a calbin (units, reservations,
// aliasing, service-manifest agreement) live in the runner's `check`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "calbin/result.hpp"

namespace calbin {

inline constexpr int kSchemaVersion = 1;
inline constexpr std::string_view kManifestFileName = "manifest.json";
// Bounds the reader enforces so that no manifest makes it allocate without limit.
inline constexpr size_t kMaxRank = 8;
inline constexpr uint32_t kMaxChips = 8;
inline constexpr size_t kMaxManifestBytes = size_t{64} << 20;

enum class Dtype { kInt8, kInt32, kBf16, kF16, kF32, kInt4 };
std::optional<Dtype> parse_dtype(std::string_view text);
std::string_view to_string(Dtype dtype);
// Bits per element (4 for int4), so byte sizes are computed as ceil(elements * bits / 8).
uint32_t dtype_bits(Dtype dtype);
// Bits of one KV head's cache at one position: head_dim K and V elements, plus the FP32
// scale an int8 V-cache keeps per position and head (MODEL.md, "KV cache"). Below 2^40.
uint64_t kv_head_slot_bits(Dtype k_dtype, Dtype v_dtype, uint32_t head_dim);

enum class ModelType { kPrefill, kDecode, kKvUpdate };
std::optional<ModelType> parse_model_type(std::string_view text);
std::string_view to_string(ModelType type);

enum class TensorRole { kOther, kToken, kPosition, kLogits, kTopIds, kTopLogits };
std::optional<TensorRole> parse_tensor_role(std::string_view text);
std::string_view to_string(TensorRole role);

// Physical layout. kTiled stores logical [..., R, C] as [ceil(C / tile_d0)][..., R][tile_d0],
// zero-padded: the last dimension is cut into tiles and the tile index becomes outermost.
struct Layout {
  enum class Kind { kRowMajor, kTiled };
  Kind kind = Kind::kRowMajor;
  uint32_t tile_d0 = 0;  // > 0 iff kind == kTiled
};

// A byte quantity with the unit it was written in ("B", "KiB", "MiB", "GiB", "KB", "MB",
// "GB"). The unit is kept so that `check` can judge its plausibility.
struct MemoryAmount {
  uint64_t value = 0;
  std::string unit;
  // value converted to bytes; nullopt on overflow or an unknown unit.
  std::optional<uint64_t> bytes() const;
};

struct FileEntry {
  std::string path;  // relative to the calbin directory, '/'-separated
  uint64_t size = 0;
  std::string sha256;  // lowercase hex, 64 characters
};

struct ParamBlock {
  std::string name;
  std::string file;        // a FileEntry path
  uint32_t chip_mask = 0;  // bit c set: chip c loads this block into its params reservation
};

// A region of one chip's device memory.
struct Reservation {
  std::string name;  // "params", "kv_cache", "workspace", "io", "command", "guard", ...
  uint32_t chip = 0;
  uint64_t base = 0;  // byte address in the chip's DRAM
  MemoryAmount size;
};

struct Quant {
  // "none" (dtype used as is), "w8a8_dynamic" (int8 weights with one f32 scale per output
  // row; activations quantised per token at run time), "w4af16" (int4 weights with one
  // scale per group of group_size input elements).
  std::string scheme = "none";
  std::string scale_file;  // a FileEntry path; empty when scheme == "none"
  uint64_t scale_offset = 0;
  uint64_t scale_count = 0;  // f32 values
  uint32_t group_size = 0;
};

// Which slice of the logical tensor a weight entry holds.
struct Shard {
  int axis = -1;       // -1: the whole tensor (replicated on every chip in chip_mask)
  uint32_t index = 0;  // shard index along axis
  uint32_t count = 1;  // number of shards along axis
  uint64_t begin = 0;  // [begin, end) along axis
  uint64_t end = 0;
  uint32_t chip_mask = 0;
};

// One stored piece of a weight tensor. A tensor split over two chips has two entries with
// the same name. Data is the shard's slice, row-major, little-endian.
struct WeightTensor {
  std::string name;            // e.g. "layers.0.attn.q_proj"
  std::string role;            // e.g. "attn_q"; see FORMAT.md for the list
  int layer = -1;              // -1 for tensors outside the layer stack
  std::vector<int64_t> shape;  // logical (unsplit) shape
  Dtype dtype = Dtype::kBf16;
  Quant quant;
  Shard shard;
  std::string file;  // a FileEntry path; empty for timing-only calbins
  uint64_t offset = 0;
  uint64_t bytes = 0;  // of this shard
};

struct TensorDesc {
  std::string name;
  TensorRole role = TensorRole::kOther;
  std::vector<int64_t> shape;
  Dtype dtype = Dtype::kInt32;
  Layout layout;
  uint64_t bytes = 0;  // in the buffer, tiling padding included
  uint64_t address = 0;
  uint32_t chip_mask = 0;
  std::string reservation;  // the reservation `address` lies in
};

struct Csr {
  std::string name;  // "cur_seq_len", "past_kv_cur_seq_len"
  uint32_t index = 0;
  uint64_t address = 0;
};

// The fixed I/O addresses of one parallel-mode slot; one address per input/output tensor.
struct PingPongSlot {
  std::string slot;  // "ping" or "pong"
  std::vector<uint64_t> input_addresses;
  std::vector<uint64_t> output_addresses;
};

struct Op {
  std::string type;  // e.g. "flash_attention", "fused_rmsnorm", "quant_matmul_add"
  std::string name;
  int layer = -1;
  std::vector<int64_t> shape;
  Dtype dtype = Dtype::kBf16;
  uint64_t flops = 0;
  uint64_t bytes = 0;  // bytes moved to and from DRAM
  // Optional breakdown of `bytes` for the timing model; 0 = unknown (FORMAT.md, ops).
  uint64_t weight_bytes = 0;  // weights and scales: read once per submission, any token count
  uint32_t experts = 0;       // MoE: the distinct experts whose weights weight_bytes covers
  uint64_t kv_bytes = 0;      // KV-cache reads: proportional to the KV slots attention reads
  uint64_t kv_slots = 0;      // attention: KV slots (causal, own tokens included) assumed
};

struct ChipOps {
  uint32_t chip = 0;
  std::vector<Op> ops;
};

struct Model {
  std::string name;  // matched exactly, never by substring
  ModelType type = ModelType::kPrefill;
  std::string metadata_type;  // vendor metadata label, e.g. "llm_prefill"
  std::vector<TensorDesc> inputs;
  std::vector<TensorDesc> outputs;
  std::vector<Csr> csrs;
  std::vector<PingPongSlot> ping_pong;
  bool ping_pong_may_alias = false;
  uint64_t workspace_bytes = 0;  // peak per chip
  std::vector<ChipOps> ops;
};

struct LlmInfo {
  uint32_t vocab = 0;
  uint32_t context = 0;
  uint32_t batch = 0;
  uint32_t layers = 0;
  uint32_t hidden = 0;
  uint32_t q_heads = 0;
  uint32_t kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t ffn = 0;
  uint32_t experts = 0;  // 0 for dense models
  uint32_t active_experts = 0;
  uint32_t prefill_chunk = 0;
  double rope_theta = 10000.0;
  double rms_eps = 1e-6;
  Dtype k_dtype = Dtype::kBf16;
  Dtype v_dtype = Dtype::kBf16;
  std::string partition = "tensor_parallel";
  uint32_t tokenizer_context = 0;  // what the tokenizer declares; 0 if unknown
  // MoE routing: the top-k weights renormalised to sum to 1 (Hugging Face's norm_topk_prob).
  bool norm_topk_prob = false;
};

struct Provenance {
  std::string generator;
  std::string compiler_commit;
  std::string kernel_commit;
  std::string command;
  std::string config;  // free-form, usually JSON text
  std::string input_onnx_sha256;
};

struct GoldenRef {
  std::string index;  // a FileEntry path of the golden index (golden/golden.json)
};

struct Manifest {
  int schema = kSchemaVersion;
  std::string calbin_version;
  std::string architecture;
  std::string runtime_abi;
  uint32_t chips = 0;
  uint32_t chip_mask = 0;
  bool timing_only = false;             // weights declared with sizes but no files
  MemoryAmount device_memory_required;  // per chip
  LlmInfo llm;
  Provenance provenance;
  std::vector<FileEntry> files;
  std::vector<ParamBlock> param_blocks;
  std::vector<Reservation> reservations;
  std::vector<WeightTensor> weights;
  std::vector<Model> models;
  std::optional<GoldenRef> golden;

  const Model* find_model(std::string_view exact_name) const;
  const FileEntry* find_file(std::string_view path) const;
  const Reservation* find_reservation(std::string_view name, uint32_t chip) const;
};

// Bytes a tensor of this shape, dtype and layout occupies; nullopt on overflow.
std::optional<uint64_t> tensor_bytes(const std::vector<int64_t>& shape, Dtype dtype,
                                     const Layout& layout);

// Parses manifest JSON text. `file_label` names the file in error messages.
Result<Manifest> parse_manifest(std::string_view json_text, std::string_view file_label);
// Reads and parses <calbin_dir>/manifest.json.
Result<Manifest> read_manifest(const std::filesystem::path& calbin_dir);
// Serialises to JSON text (2-space indented, stable key order).
std::string to_json(const Manifest& manifest);
// Writes <calbin_dir>/manifest.json atomically (temporary file, then rename).
Result<void> write_manifest(const std::filesystem::path& calbin_dir, const Manifest& manifest);

// Checks that every FileEntry path stays inside the calbin directory, exists, and has the
// declared size and SHA-256. The error names the file and the mismatching value.
Result<void> verify_files(const std::filesystem::path& calbin_dir, const Manifest& manifest);
// Resolves a FileEntry path inside calbin_dir; an error if it would leave the directory
// (absolute paths, "..", symlinks pointing outside).
Result<std::filesystem::path> resolve_inside(const std::filesystem::path& calbin_dir,
                                             std::string_view relative_path);

}  // namespace calbin
