// The manifest's vocabulary: enum names, element sizes, byte sizes of shaped tensors, memory
// units and the lookups on a loaded manifest. Reading and writing JSON live elsewhere.
#include "calbin/manifest.hpp"

#include <array>
#include <limits>
#include <utility>

namespace calbin {
namespace {

template <class E, size_t N>
std::optional<E> lookup(const std::array<std::pair<std::string_view, E>, N>& table,
                        std::string_view text) {
  for (const auto& [name, value] : table) {
    if (name == text) {
      return value;
    }
  }
  return std::nullopt;
}

template <class E, size_t N>
std::string_view name_of(const std::array<std::pair<std::string_view, E>, N>& table, E value) {
  for (const auto& [name, entry] : table) {
    if (entry == value) {
      return name;
    }
  }
  return "?";
}

constexpr std::array<std::pair<std::string_view, Dtype>, 6> kDtypes{{
    {"int8", Dtype::kInt8},
    {"int32", Dtype::kInt32},
    {"bf16", Dtype::kBf16},
    {"f16", Dtype::kF16},
    {"f32", Dtype::kF32},
    {"int4", Dtype::kInt4},
}};

constexpr std::array<std::pair<std::string_view, ModelType>, 3> kModelTypes{{
    {"prefill", ModelType::kPrefill},
    {"decode", ModelType::kDecode},
    {"kv_update", ModelType::kKvUpdate},
}};

constexpr std::array<std::pair<std::string_view, TensorRole>, 6> kRoles{{
    {"other", TensorRole::kOther},
    {"token", TensorRole::kToken},
    {"position", TensorRole::kPosition},
    {"logits", TensorRole::kLogits},
    {"top_ids", TensorRole::kTopIds},
    {"top_logits", TensorRole::kTopLogits},
}};

// Binary units are powers of 1024, decimal ones powers of 1000 (IEC 80000-13).
constexpr std::array<std::pair<std::string_view, uint64_t>, 9> kUnits{{
    {"B", 1},
    {"KiB", uint64_t{1} << 10},
    {"MiB", uint64_t{1} << 20},
    {"GiB", uint64_t{1} << 30},
    {"TiB", uint64_t{1} << 40},
    {"KB", 1000},
    {"MB", 1000 * 1000},
    {"GB", 1000 * 1000 * 1000},
    {"TB", uint64_t{1000} * 1000 * 1000 * 1000},
}};

std::optional<uint64_t> checked_mul(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) {
    return std::nullopt;
  }
  return a * b;
}

}  // namespace

std::optional<Dtype> parse_dtype(std::string_view text) { return lookup(kDtypes, text); }
std::string_view to_string(Dtype dtype) { return name_of(kDtypes, dtype); }

uint64_t kv_head_slot_bits(Dtype k_dtype, Dtype v_dtype, uint32_t head_dim) {
  const uint64_t scale_bits = v_dtype == Dtype::kInt8 ? 32 : 0;
  return uint64_t{dtype_bits(k_dtype) + dtype_bits(v_dtype)} * head_dim + scale_bits;
}

uint32_t dtype_bits(Dtype dtype) {
  switch (dtype) {
    case Dtype::kInt4:
      return 4;
    case Dtype::kInt8:
      return 8;
    case Dtype::kBf16:
    case Dtype::kF16:
      return 16;
    case Dtype::kInt32:
    case Dtype::kF32:
      return 32;
  }
  return 0;
}

std::optional<ModelType> parse_model_type(std::string_view text) {
  return lookup(kModelTypes, text);
}
std::string_view to_string(ModelType type) { return name_of(kModelTypes, type); }

std::optional<TensorRole> parse_tensor_role(std::string_view text) { return lookup(kRoles, text); }
std::string_view to_string(TensorRole role) { return name_of(kRoles, role); }

std::optional<uint64_t> MemoryAmount::bytes() const {
  const std::optional<uint64_t> scale = lookup(kUnits, unit);
  if (!scale) {
    return std::nullopt;
  }
  return checked_mul(value, *scale);
}

// Tiling pads the last dimension up to a multiple of tile_d0 and folds the leading ones into
// rows, so the padded element count is rows * ceil(cols / d0) * d0. A scalar counts as [1].
// Non-positive dimensions have no size and also give nullopt.
std::optional<uint64_t> tensor_bytes(const std::vector<int64_t>& shape, Dtype dtype,
                                     const Layout& layout) {
  std::optional<uint64_t> elements = 1;
  for (size_t i = 0; i < shape.size() && elements; ++i) {
    if (shape[i] <= 0) {
      return std::nullopt;
    }
    uint64_t dim = static_cast<uint64_t>(shape[i]);
    const bool last = i + 1 == shape.size();
    if (last && layout.kind == Layout::Kind::kTiled) {
      if (layout.tile_d0 == 0) {
        return std::nullopt;
      }
      const uint64_t tiles = dim / layout.tile_d0 + (dim % layout.tile_d0 != 0 ? 1 : 0);
      const std::optional<uint64_t> padded = checked_mul(tiles, layout.tile_d0);
      if (!padded) {
        return std::nullopt;
      }
      dim = *padded;
    }
    elements = checked_mul(*elements, dim);
  }
  if (!elements) {
    return std::nullopt;
  }
  const std::optional<uint64_t> bits = checked_mul(*elements, dtype_bits(dtype));
  if (!bits) {
    return std::nullopt;
  }
  return *bits / 8 + (*bits % 8 != 0 ? 1 : 0);
}

const Model* Manifest::find_model(std::string_view exact_name) const {
  for (const Model& model : models) {
    if (model.name == exact_name) {
      return &model;
    }
  }
  return nullptr;
}

const FileEntry* Manifest::find_file(std::string_view path) const {
  for (const FileEntry& file : files) {
    if (file.path == path) {
      return &file;
    }
  }
  return nullptr;
}

const Reservation* Manifest::find_reservation(std::string_view name, uint32_t chip) const {
  for (const Reservation& reservation : reservations) {
    if (reservation.name == name && reservation.chip == chip) {
      return &reservation;
    }
  }
  return nullptr;
}

}  // namespace calbin
