// Host-side conversion between logical tensors and a mapped buffer's physical bytes. The
// primitives live in the adapter library (llm/host/tensor_io.hpp), which a service links
// without the runner; the runner names them as its own.
#pragma once

#include "llm/host/tensor_io.hpp"

namespace runner {

using calrt::llm::element_bytes;
using calrt::llm::Matrix2d;
using calrt::llm::physical_shape;
using calrt::llm::rank_row;
using calrt::llm::read_row_f32;
using calrt::llm::read_row_f32_into;
using calrt::llm::read_row_pick;
using calrt::llm::RowPick;
using calrt::llm::visit_row_bytes;
using calrt::llm::write_column_i32;
using calrt::llm::write_row_i32;

}  // namespace runner
