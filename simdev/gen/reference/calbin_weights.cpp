#include "simdev/gen/reference/calbin_weights.hpp"

#include <cstring>
#include <fstream>

#include "calbin/bf16.hpp"
#include "simdev/gen/reference/reference_weights.hpp"

namespace simdev::gen::ref {
namespace {

namespace fs = std::filesystem;

// Reads [offset, offset + bytes) of a calbin file, refusing a range past its end.
calbin::Result<std::vector<uint8_t>> read_range(const fs::path& dir, const std::string& file,
                                                uint64_t offset, uint64_t bytes,
                                                const std::string& field) {
  auto path = calbin::resolve_inside(dir, file);
  if (!path) {
    return tl::unexpected(path.error());
  }
  std::error_code error;
  const uint64_t size = fs::file_size(*path, error);
  if (error || offset > size || bytes > size - offset) {
    return calbin::fail(path->string(), field,
                        "bytes [" + std::to_string(offset) + ", +" + std::to_string(bytes) +
                            ") lie past the end of the file (" +
                            (error ? error.message() : std::to_string(size) + " bytes") + ")");
  }
  std::ifstream in(*path, std::ios::binary);
  std::vector<uint8_t> data(bytes);
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(bytes));
  if (!in) {
    return calbin::fail(path->string(), field, "read failed");
  }
  return data;
}

bool readable(calbin::Dtype dtype) {
  return dtype == calbin::Dtype::kInt8 || dtype == calbin::Dtype::kInt4 ||
         dtype == calbin::Dtype::kBf16 || dtype == calbin::Dtype::kF32;
}

// Element `at` of a shard's data: int4 two per byte, the even element in the low nibble.
int8_t quantised_element(const std::vector<uint8_t>& data, size_t at, calbin::Dtype dtype) {
  if (dtype == calbin::Dtype::kInt8) return static_cast<int8_t>(data[at]);
  const unsigned nibble = (at % 2 == 0 ? data[at / 2] : data[at / 2] >> 4) & 0x0fu;
  return static_cast<int8_t>(nibble >= 8 ? static_cast<int>(nibble) - 16
                                         : static_cast<int>(nibble));
}

float element_f32(const uint8_t* at, calbin::Dtype dtype) {
  if (dtype == calbin::Dtype::kBf16) {
    uint16_t bits = 0;
    std::memcpy(&bits, at, sizeof bits);
    return calbin::bf16_to_f32(bits);
  }
  float value = 0.0f;
  std::memcpy(&value, at, sizeof value);
  return value;
}

// A tensor being reassembled from its shards: which elements have been written so far.
struct Assembly {
  FileTensor tensor;
  calbin::Dtype dtype = calbin::Dtype::kBf16;
  std::vector<bool> covered;
};

class Reader {
 public:
  Reader(const fs::path& dir, const calbin::Manifest& manifest) : dir_(dir), m_(manifest) {}

  calbin::Result<std::map<std::string, FileTensor, std::less<>>> run() {
    for (size_t i = 0; i < m_.weights.size(); ++i) {
      if (auto placed = place(i); !placed) {
        return tl::unexpected(placed.error());
      }
    }
    std::map<std::string, FileTensor, std::less<>> out;
    for (auto& [name, assembly] : parts_) {
      for (size_t e = 0; e < assembly.covered.size(); ++e) {
        if (!assembly.covered[e]) {
          return calbin::fail("manifest.json", "weights " + name,
                              "its shards leave element " + std::to_string(e) + " unstored");
        }
      }
      FileTensor& t = assembly.tensor;
      if (t.quantised) {
        t.values.resize(t.q.size());
        for (size_t at = 0; at < t.q.size(); ++at) {
          t.values[at] = static_cast<float>(t.q[at]) * t.scales[at / t.group];
        }
      }
      out.emplace(name, std::move(t));
    }
    return out;
  }

 private:
  calbin::Result<void> place(size_t index) {
    const calbin::WeightTensor& w = m_.weights[index];
    const std::string field = "weights[" + std::to_string(index) + "] (" + w.name + ")";
    if (w.shape.empty() || w.shape.size() > 2 || !readable(w.dtype)) {
      return calbin::fail("manifest.json", field,
                          "the functional model reads 1-D or 2-D int8, int4, bf16 or f32 "
                          "tensors, got dtype " +
                              std::string(calbin::to_string(w.dtype)));
    }
    const bool int8 = w.dtype == calbin::Dtype::kInt8, int4 = w.dtype == calbin::Dtype::kInt4;
    const bool quantised = int8 || int4;
    const std::string scheme = int8 ? "w8a8_dynamic" : int4 ? "w4af16" : "none";
    if (w.quant.scheme != scheme) {
      return calbin::fail("manifest.json", field,
                          "quant scheme \"" + w.quant.scheme + "\" with dtype " +
                              std::string(calbin::to_string(w.dtype)));
    }
    Assembly& a = parts_[w.name];
    const size_t rows = static_cast<size_t>(w.shape[0]);
    const size_t cols = w.shape.size() == 2 ? static_cast<size_t>(w.shape[1]) : 1;
    const size_t group = int4 ? w.quant.group_size : cols;
    if (a.covered.empty()) {
      a.tensor.shape = w.shape;
      a.tensor.quantised = quantised;
      a.tensor.group = group;
      a.tensor.int4 = int4;
      a.dtype = w.dtype;
      a.covered.assign(rows * cols, false);
      if (quantised) {
        a.tensor.q.resize(rows * cols);
        a.tensor.scales.assign(group == 0 ? 0 : rows * (cols / group), 0.0f);
      } else {
        a.tensor.values.resize(rows * cols);
      }
    } else if (a.tensor.shape != w.shape || a.dtype != w.dtype || a.tensor.group != group) {
      return calbin::fail("manifest.json", field,
                          "shards disagree on the shape, dtype or group size");
    }
    // The shard's slice: rows [r0, r1) x cols [c0, c1).
    size_t r0 = 0, r1 = rows, c0 = 0, c1 = cols;
    if (w.shard.axis == 0 || w.shard.axis == 1) {
      const size_t extent = w.shard.axis == 0 ? rows : cols;
      if (w.shard.begin >= w.shard.end || w.shard.end > extent) {
        return calbin::fail("manifest.json", field + ".shard",
                            "range [" + std::to_string(w.shard.begin) + ", " +
                                std::to_string(w.shard.end) + ") outside the axis of " +
                                std::to_string(extent));
      }
      (w.shard.axis == 0 ? r0 : c0) = w.shard.begin;
      (w.shard.axis == 0 ? r1 : c1) = w.shard.end;
    }
    // A w4af16 group lies inside one shard, and a shard's rows pack into whole bytes.
    if (int4 && (group == 0 || group % 2 != 0 || c0 % group != 0 || c1 % group != 0)) {
      return calbin::fail("manifest.json", field + ".quant.group_size",
                          std::to_string(group) + " does not divide the shard's columns [" +
                              std::to_string(c0) + ", " + std::to_string(c1) +
                              ") into even groups");
    }
    const uint64_t expected = (uint64_t{r1 - r0} * (c1 - c0) * calbin::dtype_bits(w.dtype) + 7) / 8;
    if (w.bytes != expected) {
      return calbin::fail(
          "manifest.json", field + ".bytes",
          std::to_string(w.bytes) + " but the shard holds " + std::to_string(expected) + " bytes");
    }
    auto data = read_range(dir_, w.file, w.offset, w.bytes, field);
    if (!data) {
      return tl::unexpected(data.error());
    }
    for (size_t r = r0; r < r1; ++r) {
      for (size_t c = c0; c < c1; ++c) {
        const size_t at = r * cols + c;
        if (a.covered[at]) {
          return calbin::fail("manifest.json", field,
                              "shards overlap at element " + std::to_string(at));
        }
        a.covered[at] = true;
        const size_t in_shard = (r - r0) * (c1 - c0) + (c - c0);
        if (quantised) {
          a.tensor.q[at] = quantised_element(*data, in_shard, w.dtype);
        } else {
          a.tensor.values[at] = element_f32(
              data->data() + in_shard * (w.dtype == calbin::Dtype::kBf16 ? 2 : 4), w.dtype);
        }
      }
    }
    if (!quantised) return {};
    // w8a8_dynamic: an axis-0 shard holds its rows' scales, any other every row's. w4af16:
    // a shard holds the groups of its own rows and columns (MODEL.md).
    const bool all_rows = w.shard.axis != 0;
    const size_t g0 = int4 ? c0 / group : 0, g1 = int4 ? c1 / group : 1;
    return place_scales(w, field, a, all_rows ? 0 : r0, all_rows ? rows : r1, g0, g1);
  }

  // Scales of rows [r0, r1) x groups [g0, g1), stored row-major in the shard's scale range.
  calbin::Result<void> place_scales(const calbin::WeightTensor& w, const std::string& field,
                                    Assembly& a, size_t r0, size_t r1, size_t g0, size_t g1) {
    const size_t count = (r1 - r0) * (g1 - g0);
    if (w.quant.scale_count != count) {
      return calbin::fail(
          "manifest.json", field + ".quant.scale_count",
          std::to_string(w.quant.scale_count) + " but the shard needs " + std::to_string(count));
    }
    auto data = read_range(dir_, w.quant.scale_file, w.quant.scale_offset, count * sizeof(float),
                           field + ".quant");
    if (!data) {
      return tl::unexpected(data.error());
    }
    const size_t per_row = a.tensor.cols() / a.tensor.group;
    for (size_t r = r0, i = 0; r < r1; ++r) {
      for (size_t g = g0; g < g1; ++g, ++i) {
        std::memcpy(&a.tensor.scales[r * per_row + g], data->data() + i * sizeof(float),
                    sizeof(float));
      }
    }
    return {};
  }

  const fs::path& dir_;
  const calbin::Manifest& m_;
  std::map<std::string, Assembly, std::less<>> parts_;
};

class Lookup {
 public:
  explicit Lookup(const CalbinWeights& weights) : weights_(weights) {}

  calbin::Result<std::vector<float>> vector(const std::string& name) const {
    const FileTensor* t = weights_.find(name);
    if (t == nullptr || t->shape.size() != 1) {
      return calbin::fail("weights", name, "1-D tensor missing");
    }
    return t->values;
  }

  calbin::Result<Matrix> matrix(const std::string& name) const {
    const FileTensor* t = weights_.find(name);
    if (t == nullptr || t->shape.size() != 2) {
      return calbin::fail("weights", name, "2-D tensor missing");
    }
    return Matrix{t->rows(), t->cols(), t->values};
  }

 private:
  const CalbinWeights& weights_;
};

}  // namespace

calbin::Result<CalbinWeights> CalbinWeights::read(const fs::path& dir,
                                                  const calbin::Manifest& manifest) {
  auto tensors = Reader(dir, manifest).run();
  if (!tensors) {
    return tl::unexpected(tensors.error());
  }
  CalbinWeights out;
  out.tensors_ = std::move(*tensors);
  return out;
}

const FileTensor* CalbinWeights::find(std::string_view name) const {
  const auto found = tensors_.find(name);
  return found == tensors_.end() ? nullptr : &found->second;
}

calbin::Result<Weights> dequantised(const ModelConfig& config, const CalbinWeights& weights) {
  return gather_weights(config, Lookup(weights));
}

}  // namespace simdev::gen::ref
