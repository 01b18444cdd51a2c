// The manifest reader's shaped things: I/O tensor descriptors and weight entries, whose
// shapes, dtypes, layouts and byte sizes must agree.
#include "calbin/manifest_fields.hpp"

namespace calbin::detail {
namespace {

Layout read_layout(const Fields& object) {
  const std::string kind = object.str("kind");
  const uint32_t tile_d0 = object.u32("tile_d0", 0);
  if (kind == "row_major") {
    if (tile_d0 != 0) {
      throw FieldError{object.at("tile_d0"), "row_major layout with tile_d0 " +
                                                 std::to_string(tile_d0) +
                                                 "; only a tiled layout has a tile size"};
    }
    return Layout{};
  }
  if (kind != "tiled") {
    throw FieldError{object.at("kind"), "unknown layout kind " + quote(kind)};
  }
  if (tile_d0 == 0) {
    throw FieldError{object.at("tile_d0"), "tiled layout needs tile_d0 > 0, got 0 or none"};
  }
  return Layout{Layout::Kind::kTiled, tile_d0};
}

TensorRole read_role(const Fields& object) {
  const std::string text = object.str("role", "other");
  const std::optional<TensorRole> role = parse_tensor_role(text);
  if (!role) {
    throw FieldError{object.at("role"), "unknown tensor role " + quote(text)};
  }
  return *role;
}

std::string layout_text(const Layout& layout) {
  if (layout.kind == Layout::Kind::kRowMajor) {
    return "row_major";
  }
  return "tiled(" + std::to_string(layout.tile_d0) + ")";
}

Quant read_quant(const Fields& object) {
  Quant quant;
  quant.scheme = object.str("scheme");
  if (quant.scheme != "none" && quant.scheme != "w8a8_dynamic" && quant.scheme != "w4af16") {
    throw FieldError{object.at("scheme"), "unknown quantisation scheme " + quote(quant.scheme)};
  }
  quant.scale_file = object.str("scale_file", "");
  quant.scale_offset = object.u64("scale_offset", 0);
  quant.scale_count = object.u64("scale_count", 0);
  quant.group_size = object.u32("group_size", 0);
  return quant;
}

Shard read_shard(const Fields& object, size_t rank) {
  Shard shard;
  shard.axis = object.i32("axis");
  if (shard.axis < -1 || shard.axis >= static_cast<int>(rank)) {
    throw FieldError{object.at("axis"), "axis " + std::to_string(shard.axis) +
                                            " is neither -1 nor a dimension of a rank-" +
                                            std::to_string(rank) + " shape"};
  }
  shard.count = object.u32("count");
  if (shard.count == 0) {
    throw FieldError{object.at("count"), "shard count 0; a whole tensor has count 1"};
  }
  shard.index = object.u32("index");
  if (shard.index >= shard.count) {
    throw FieldError{object.at("index"), "shard index " + std::to_string(shard.index) +
                                             " is not below count " + std::to_string(shard.count)};
  }
  shard.begin = object.u64("begin");
  shard.end = object.u64("end");
  shard.chip_mask = object.u32("chip_mask");
  return shard;
}

}  // namespace

Dtype read_dtype(const Fields& object, std::string_view key) {
  const std::string text = object.str(key);
  const std::optional<Dtype> dtype = parse_dtype(text);
  if (!dtype) {
    throw FieldError{object.at(key), "unknown dtype " + quote(text)};
  }
  return *dtype;
}

std::vector<int64_t> read_shape(const Fields& object) {
  const std::string field = object.at("shape");
  const Json& dims = object.array("shape");
  if (dims.size() > kMaxRank) {
    throw FieldError{field, "rank " + std::to_string(dims.size()) + " exceeds the maximum of " +
                                std::to_string(kMaxRank)};
  }
  std::vector<int64_t> shape;
  shape.reserve(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    shape.push_back(as_dim(dims[i], join(field, i)));
  }
  return shape;
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    text += (i == 0 ? "" : ", ") + std::to_string(shape[i]);
  }
  return text + "]";
}

uint64_t require_size(const Fields& object, const std::vector<int64_t>& shape, Dtype dtype,
                      const Layout& layout) {
  const std::optional<uint64_t> bytes = tensor_bytes(shape, dtype, layout);
  if (!bytes) {
    throw FieldError{object.at("shape"), "shape " + shape_text(shape) + " of " +
                                             std::string(to_string(dtype)) +
                                             " overflows 64-bit arithmetic"};
  }
  return *bytes;
}

TensorDesc read_tensor(const Fields& object) {
  TensorDesc tensor;
  tensor.name = object.str("name");
  tensor.role = read_role(object);
  tensor.shape = read_shape(object);
  tensor.dtype = read_dtype(object, "dtype");
  if (object.has("layout")) {
    tensor.layout = read_layout(object.object("layout"));
  }
  tensor.bytes = object.u64("bytes");
  tensor.address = object.u64("address");
  tensor.chip_mask = object.u32("chip_mask");
  tensor.reservation = object.str("reservation", "");
  const uint64_t needed = require_size(object, tensor.shape, tensor.dtype, tensor.layout);
  if (needed > tensor.bytes) {
    throw FieldError{object.at("bytes"),
                     "tensor " + quote(tensor.name) + " " + shape_text(tensor.shape) + " " +
                         std::string(to_string(tensor.dtype)) + " " + layout_text(tensor.layout) +
                         " needs " + std::to_string(needed) + " bytes but its buffer has " +
                         std::to_string(tensor.bytes) + " (a tensor bigger than its buffer)"};
  }
  return tensor;
}

WeightTensor read_weight(const Fields& object) {
  WeightTensor weight;
  weight.name = object.str("name");
  weight.role = object.str("role");
  weight.layer = object.i32("layer", -1);
  weight.shape = read_shape(object);
  weight.dtype = read_dtype(object, "dtype");
  require_size(object, weight.shape, weight.dtype, Layout{});
  if (object.has("quant")) {
    weight.quant = read_quant(object.object("quant"));
  }
  if (object.has("shard")) {
    weight.shard = read_shard(object.object("shard"), weight.shape.size());
  }
  weight.file = object.str("file", "");
  weight.offset = object.u64("offset", 0);
  weight.bytes = object.u64("bytes");
  return weight;
}

}  // namespace calbin::detail
