// Internal to the calbin library: the manifest reader's pieces shared between its files.
// All of them throw detail::FieldError naming the field path and the offending value.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "calbin/json_fields.hpp"
#include "calbin/manifest.hpp"

namespace calbin::detail {

Dtype read_dtype(const Fields& object, std::string_view key);
// object["shape"]: rank <= kMaxRank, every dimension > 0.
std::vector<int64_t> read_shape(const Fields& object);
std::string shape_text(const std::vector<int64_t>& shape);
// The shape's byte size; throws when 64-bit arithmetic cannot hold it.
uint64_t require_size(const Fields& object, const std::vector<int64_t>& shape, Dtype dtype,
                      const Layout& layout);

TensorDesc read_tensor(const Fields& object);
WeightTensor read_weight(const Fields& object);

}  // namespace calbin::detail
