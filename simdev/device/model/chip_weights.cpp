#include "simdev/device/model/chip_weights.hpp"

#include <cstring>
#include <fstream>
#include <string>

#include "calbin/bf16.hpp"

namespace simdev {
namespace {

struct Loader {
  const std::filesystem::path& dir;
  const calbin::Manifest& manifest;
  const ModelDims& dims;
  uint32_t chip;
  bool swap_nibbles = false;
  uint64_t loaded_bytes = 0;

  uint32_t mask_of(const calbin::WeightTensor& w) const {
    if (w.shard.chip_mask != 0) {
      return w.shard.chip_mask;
    }
    for (const auto& block : manifest.param_blocks) {
      if (block.file == w.file) {
        return block.chip_mask;
      }
    }
    return 0;
  }

  Expected<const calbin::WeightTensor*> find(const std::string& name) const {
    for (const auto& w : manifest.weights) {
      if (w.name == name && (mask_of(w) >> chip & 1u) != 0) {
        return &w;
      }
    }
    return fail(CALRT_CALBIN_INVALID,
                "weight \"" + name + "\" has no shard for chip " + std::to_string(chip));
  }

  // Reads count bytes at offset of a calbin file, checking the range lies inside it, as
  // count / sizeof(T) values of T (the caller has checked that the size divides).
  template <class T = uint8_t>
  Expected<std::vector<T>> read(const std::string& what, const std::string& file, uint64_t offset,
                                uint64_t count) {
    auto path = calbin::resolve_inside(dir, file);
    if (!path) {
      return fail(CALRT_CALBIN_INVALID, what + ": " + path.error().to_string());
    }
    std::error_code ec;
    const uint64_t size = std::filesystem::file_size(*path, ec);
    if (ec || offset > size || count > size - offset) {
      return fail(CALRT_CALBIN_INVALID, what + ": range [" + std::to_string(offset) + ", " +
                                            std::to_string(offset + count) + ") leaves file \"" +
                                            file + "\" of " + std::to_string(size) + " bytes");
    }
    std::vector<T> data(count / sizeof(T));
    std::ifstream in(*path, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(count));
    if (!in) {
      return fail(CALRT_CALBIN_INVALID, what + ": cannot read file \"" + file + "\"");
    }
    loaded_bytes += count;
    return data;
  }

  Status check_shard(const calbin::WeightTensor& w, int axis, size_t rows, size_t cols) const {
    const std::string label = "weight \"" + w.name + "\" (file \"" + w.file + "\")";
    if (w.shape.size() != 2 && !(axis < 0 && w.shape.size() == 1)) {
      return fail(CALRT_CALBIN_INVALID, label + ": rank " + std::to_string(w.shape.size()));
    }
    if (w.shard.axis != axis) {
      return fail(CALRT_CALBIN_INVALID, label + ": split axis " + std::to_string(w.shard.axis) +
                                            ", expected " + std::to_string(axis));
    }
    if (axis >= 0) {
      const uint64_t size = static_cast<uint64_t>(w.shape[static_cast<size_t>(axis)]);
      const uint64_t begin = chip * size / dims.chips;
      const uint64_t end = (chip + 1) * size / dims.chips;
      if (w.shard.begin != begin || w.shard.end != end) {
        return fail(CALRT_CALBIN_INVALID,
                    label + ": shard [" + std::to_string(w.shard.begin) + ", " +
                        std::to_string(w.shard.end) + ") on chip " + std::to_string(chip) +
                        ", expected [" + std::to_string(begin) + ", " + std::to_string(end) + ")");
      }
    }
    const int64_t expect_rows = static_cast<int64_t>(axis == 0 ? rows * dims.chips : rows);
    const int64_t expect_cols = static_cast<int64_t>(axis == 1 ? cols * dims.chips : cols);
    const bool shape_ok = w.shape.size() == 1
                              ? w.shape[0] == expect_cols && rows == 1
                              : w.shape[0] == expect_rows && w.shape[1] == expect_cols;
    if (!shape_ok) {
      return fail(CALRT_CALBIN_INVALID, label + ": unexpected logical shape for the model dims");
    }
    return {};
  }

  // A BF16 weight widened to FP32.
  Expected<std::vector<float>> bf16(const std::string& name, int axis, size_t rows, size_t cols) {
    auto bits = bf16_bits(name, axis, rows, cols);
    if (!bits) {
      return tl::unexpected(bits.error());
    }
    std::vector<float> values(bits->size());
    for (size_t i = 0; i < values.size(); ++i) {
      values[i] = calbin::bf16_to_f32((*bits)[i]);
    }
    return values;
  }

  // A BF16 weight as stored (little-endian, as every target of the simulator is); with
  // `load` false, only checked, and returned empty.
  Expected<std::vector<uint16_t>> bf16_bits(const std::string& name, int axis, size_t rows,
                                            size_t cols, bool load = true) {
    auto w = find(name);
    if (!w) {
      return tl::unexpected(w.error());
    }
    if (auto ok = check_shard(**w, axis, rows, cols); !ok) {
      return tl::unexpected(ok.error());
    }
    if ((*w)->dtype != calbin::Dtype::kBf16 || (*w)->bytes != rows * cols * 2) {
      return fail(CALRT_CALBIN_INVALID, "weight \"" + name + "\": expected bf16 of " +
                                            std::to_string(rows * cols * 2) + " bytes, got " +
                                            std::to_string((*w)->bytes));
    }
    if (!load) return std::vector<uint16_t>{};
    return read<uint16_t>("weight \"" + name + "\"", (*w)->file, (*w)->offset, (*w)->bytes);
  }

  Expected<Int8Matrix> int8(const std::string& name, int axis, size_t rows, size_t cols) {
    auto w = find(name);
    if (!w) {
      return tl::unexpected(w.error());
    }
    if (auto ok = check_shard(**w, axis, rows, cols); !ok) {
      return tl::unexpected(ok.error());
    }
    const calbin::WeightTensor& t = **w;
    if (t.dtype == calbin::Dtype::kInt4) {
      return int4(name, t, rows, cols);
    }
    if (t.dtype != calbin::Dtype::kInt8 || t.quant.scheme != "w8a8_dynamic" ||
        t.bytes != rows * cols || t.quant.scale_count != rows) {
      return fail(CALRT_CALBIN_INVALID,
                  "weight \"" + name + "\": expected int8 w8a8_dynamic of " +
                      std::to_string(rows * cols) + " bytes with " + std::to_string(rows) +
                      " scales, got " + std::string(calbin::to_string(t.dtype)) + " " +
                      t.quant.scheme + " of " + std::to_string(t.bytes) + " bytes with " +
                      std::to_string(t.quant.scale_count) + " scales");
    }
    auto values = read<int8_t>("weight \"" + name + "\"", t.file, t.offset, t.bytes);
    if (!values) {
      return tl::unexpected(values.error());
    }
    auto scales = read<float>("scales of weight \"" + name + "\"", t.quant.scale_file,
                              t.quant.scale_offset, rows * sizeof(float));
    if (!scales) {
      return tl::unexpected(scales.error());
    }
    Int8Matrix m{rows, cols, std::move(*values), std::move(*scales), false, cols, {}};
    m.row_sums.resize(rows);
    kernels::int8_row_sums(m.values.data(), rows, cols, m.row_sums.data());
    return m;
  }

  // w4af16: two's complement nibbles, the even column low (MODEL.md); the shard's own groups.
  Expected<Int8Matrix> int4(const std::string& name, const calbin::WeightTensor& t, size_t rows,
                            size_t cols) {
    const size_t group = t.quant.group_size;
    const bool groups_ok = group > 0 && group % 2 == 0 && cols % group == 0;
    const size_t scale_count = groups_ok ? rows * (cols / group) : 0;
    if (t.quant.scheme != "w4af16" || !groups_ok || t.bytes != rows * cols / 2 ||
        t.quant.scale_count != scale_count) {
      return fail(CALRT_CALBIN_INVALID,
                  "weight \"" + name + "\": int4 " + t.quant.scheme + " with group_size " +
                      std::to_string(group) + ", " + std::to_string(t.bytes) + " bytes and " +
                      std::to_string(t.quant.scale_count) + " scales; a w4af16 shard of " +
                      std::to_string(rows) + " x " + std::to_string(cols) +
                      " needs an even group_size dividing " + std::to_string(cols) + ", " +
                      std::to_string(rows * cols / 2) +
                      " bytes and rows x cols / group_size "
                      "scales");
    }
    auto packed = read("weight \"" + name + "\"", t.file, t.offset, t.bytes);
    if (!packed) {
      return tl::unexpected(packed.error());
    }
    auto scales = read("scales of weight \"" + name + "\"", t.quant.scale_file,
                       t.quant.scale_offset, scale_count * sizeof(float));
    if (!scales) {
      return tl::unexpected(scales.error());
    }
    Int8Matrix m{
        rows,  cols, std::vector<int8_t>(rows * cols), std::vector<float>(scale_count), true,
        group, {}};
    const auto signed_nibble = [](unsigned n) {
      return static_cast<int8_t>(n >= 8 ? int(n) - 16 : int(n));
    };
    for (size_t i = 0; i < packed->size(); ++i) {
      const unsigned low = (*packed)[i] & 0x0fu, high = (*packed)[i] >> 4;
      m.values[2 * i] = signed_nibble(swap_nibbles ? high : low);
      m.values[2 * i + 1] = signed_nibble(swap_nibbles ? low : high);
    }
    std::memcpy(m.scales.data(), scales->data(), scales->size());
    return m;
  }
};

#define SIMDEV_ASSIGN(target, expr)           \
  do {                                        \
    auto result_ = (expr);                    \
    if (!result_) {                           \
      return tl::unexpected(result_.error()); \
    }                                         \
    (target) = std::move(*result_);           \
  } while (false)

Expected<MlpWeights> load_mlp(Loader& loader, const std::string& p) {
  const ModelDims& d = loader.dims;
  MlpWeights w;
  SIMDEV_ASSIGN(w.gate_proj, loader.int8(p + "gate_proj", 0, d.ffn_local(), d.hidden));
  SIMDEV_ASSIGN(w.up_proj, loader.int8(p + "up_proj", 0, d.ffn_local(), d.hidden));
  SIMDEV_ASSIGN(w.down_proj, loader.int8(p + "down_proj", 1, d.hidden, d.ffn_local()));
  return w;
}

Expected<LayerWeights> load_layer(Loader& loader, size_t l) {
  const ModelDims& d = loader.dims;
  const std::string p = "layers." + std::to_string(l) + ".";
  const size_t qd = d.q_heads_local() * d.head_dim;
  const size_t kvd = d.kv_heads_local() * d.head_dim;
  LayerWeights w;
  SIMDEV_ASSIGN(w.attn_norm, loader.bf16(p + "attn_norm", -1, 1, d.hidden));
  SIMDEV_ASSIGN(w.q_norm, loader.bf16(p + "attn.q_norm", -1, 1, d.head_dim));
  SIMDEV_ASSIGN(w.k_norm, loader.bf16(p + "attn.k_norm", -1, 1, d.head_dim));
  SIMDEV_ASSIGN(w.ffn_norm, loader.bf16(p + "ffn_norm", -1, 1, d.hidden));
  SIMDEV_ASSIGN(w.q_proj, loader.int8(p + "attn.q_proj", 0, qd, d.hidden));
  SIMDEV_ASSIGN(w.k_proj, loader.int8(p + "attn.k_proj", 0, kvd, d.hidden));
  SIMDEV_ASSIGN(w.v_proj, loader.int8(p + "attn.v_proj", 0, kvd, d.hidden));
  SIMDEV_ASSIGN(w.o_proj, loader.int8(p + "attn.o_proj", 1, d.hidden, qd));
  if (d.experts == 0) {
    SIMDEV_ASSIGN(w.mlp, load_mlp(loader, p + "mlp."));
    return w;
  }
  SIMDEV_ASSIGN(w.router, loader.bf16(p + "mlp.gate", -1, d.experts, d.hidden));
  w.experts.resize(d.experts);
  for (size_t e = 0; e < d.experts; ++e) {
    SIMDEV_ASSIGN(w.experts[e], load_mlp(loader, p + "mlp.experts." + std::to_string(e) + "."));
  }
  return w;
}

}  // namespace

Expected<ChipWeights> load_chip_weights(const std::filesystem::path& calbin_dir,
                                        const calbin::Manifest& manifest, const ModelDims& dims,
                                        uint32_t chip, bool swap_nibbles) {
  Loader loader{calbin_dir, manifest, dims, chip, swap_nibbles};
  ChipWeights weights;
  weights.chip = chip;
  // Every chip holds a copy of the table, the same bytes; a step looks tokens up in chip 0's,
  // so the other copies are checked and not read.
  SIMDEV_ASSIGN(weights.embedding,
                loader.bf16_bits("tok_embeddings", -1, dims.vocab, dims.hidden, chip == 0));
  SIMDEV_ASSIGN(weights.final_norm, loader.bf16("final_norm", -1, 1, dims.hidden));
  SIMDEV_ASSIGN(weights.lm_head, loader.bf16_bits("lm_head", 0, dims.vocab_local(), dims.hidden));
  for (size_t l = 0; l < dims.layers; ++l) {
    LayerWeights layer;
    SIMDEV_ASSIGN(layer, load_layer(loader, l));
    weights.layers.push_back(std::move(layer));
  }
  weights.loaded_bytes = loader.loaded_bytes;
  return weights;
}

}  // namespace simdev
