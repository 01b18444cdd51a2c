// The weights of a functional calbin as its files hold them (calbin/MODEL.md, "Weights"):
// every stored shard read back from its param block and reassembled into the logical
// tensor. Both golden references read their weights from here, so the golden set rests on
// the bytes the device loads, not on the generator's memory.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "calbin/manifest.hpp"
#include "calbin/result.hpp"
#include "simdev/gen/model_config.hpp"
#include "simdev/gen/reference/reference_model.hpp"

namespace simdev::gen::ref {

// One logical tensor, unsplit. A w8a8_dynamic matrix keeps its int8 values and row scales;
// every tensor also has its values in f32 (int8 * row scale, or bf16 widened).
struct FileTensor {
  std::vector<int64_t> shape;
  bool quantised = false;
  bool int4 = false;          // w4af16 (else w8a8_dynamic) when quantised
  std::vector<int8_t> q;      // [rows * cols] when quantised (int4 values unpacked)
  size_t group = 0;           // inputs per scale when quantised: cols for w8a8_dynamic
  std::vector<float> scales;  // [rows][cols / group] when quantised
  std::vector<float> values;
  size_t rows() const { return shape.empty() ? 0 : static_cast<size_t>(shape[0]); }
  size_t cols() const { return shape.size() < 2 ? 1 : static_cast<size_t>(shape[1]); }
};

class CalbinWeights {
 public:
  // Reads every weight entry of `manifest` from the files under `dir`. Errors name the
  // tensor and the shard: a short file, a size that disagrees with the shape, shards that
  // leave a gap or overlap, a scale vector of the wrong length.
  static calbin::Result<CalbinWeights> read(const std::filesystem::path& dir,
                                            const calbin::Manifest& manifest);
  // nullptr when the calbin has no tensor of that exact name.
  const FileTensor* find(std::string_view name) const;

 private:
  std::map<std::string, FileTensor, std::less<>> tensors_;
};

// The FP32 reference's weights: every tensor of MODEL.md, dequantised and unsplit.
calbin::Result<Weights> dequantised(const ModelConfig& config, const CalbinWeights& weights);

}  // namespace simdev::gen::ref
