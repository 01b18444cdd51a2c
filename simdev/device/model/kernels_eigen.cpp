// Compiled for AVX2 and FMA on x86-64 (CMakeLists.txt), and called only on a CPU that has
// them; the results are exact integers before scaling, so they do not depend on the ISA.
// Nothing here instantiates a standard-library template: an inline function compiled with
// AVX2 in this file could be the copy the linker keeps for every other file too.
#include "simdev/device/model/kernels_eigen.hpp"

#include <Eigen/Core>

namespace simdev::kernels::eigen {
namespace {

using Matrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Scratch reused by a thread's calls: a prefill chunk calls this hundreds of times.
struct Scratch {
  Matrix a, w, c;
  Eigen::Matrix<int32_t, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor> sums;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

}  // namespace

void int8_matmul(const int8_t* a, const float* a_scales, size_t rows, size_t in, const int8_t* w,
                 const float* w_scales, size_t out_features, float* out) {
  Scratch& s = scratch();
  const auto r = static_cast<Eigen::Index>(rows);
  const auto o = static_cast<Eigen::Index>(out_features);
  s.sums.setZero(r, o);
  for (size_t first = 0; first < in; first += kExactBlock) {
    const size_t width = in - first < kExactBlock ? in - first : kExactBlock;
    const auto k = static_cast<Eigen::Index>(width);
    s.a.resize(r, k);
    s.w.resize(o, k);
    for (size_t row = 0; row < rows; ++row) {
      const int8_t* src = a + row * in + first;
      float* dst = s.a.data() + row * width;
      for (size_t i = 0; i < width; ++i) dst[i] = static_cast<float>(src[i]);
    }
    for (size_t row = 0; row < out_features; ++row) {
      const int8_t* src = w + row * in + first;
      float* dst = s.w.data() + row * width;
      for (size_t i = 0; i < width; ++i) dst[i] = static_cast<float>(src[i]);
    }
    s.c.noalias() = s.a * s.w.transpose();
    s.sums += s.c.cast<int32_t>();
  }
  for (size_t row = 0; row < rows; ++row) {
    for (size_t col = 0; col < out_features; ++col) {
      out[row * out_features + col] = static_cast<float>(s.sums.data()[row * out_features + col]) *
                                      a_scales[row] * w_scales[col];
    }
  }
}

}  // namespace simdev::kernels::eigen
