// The per-instruction-set kernels behind kernels.hpp's dispatch. Each namespace lives in its
// own translation unit, compiled for its instruction set and called only on a CPU that has
// it (kernels::supported). Same contracts and bits as the reference loops in kernels.cpp.
#pragma once

#include <cstddef>
#include <cstdint>

#include "simdev/device/model/kernels.hpp"

namespace simdev::kernels {

#define SIMDEV_KERNELS_ISA_DECLARATIONS                                                       \
  void int8_matmul(const int8_t* a, const float* a_scales, size_t rows, const Int8Weights& w, \
                   float* out, size_t out_stride);                                            \
  void matvec(const float* x, size_t in, const float* w, size_t out_features, float* out);    \
  void matvec(const float* x, size_t in, const uint16_t* w, size_t out_features, float* out);

namespace avx2 {
SIMDEV_KERNELS_ISA_DECLARATIONS
}
namespace avx512 {
SIMDEV_KERNELS_ISA_DECLARATIONS
}

#undef SIMDEV_KERNELS_ISA_DECLARATIONS

}  // namespace simdev::kernels
