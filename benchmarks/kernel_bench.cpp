// The device's int8 matmul (W8A8, simdev/device/model/kernels.hpp) at the shapes of the 0.6B
// dense model on two chips (hidden 1024, FFN 3072 split in halves): the reference loops
// against the Eigen GEMM path, at a prefill chunk's 256 rows, the dispatch threshold and one
// decode row. Each run first checks that both give the same bits and fails otherwise, so the
// ctest run of it is a correctness guard too.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "checked_main.hpp"
#include "simdev/device/model/kernels.hpp"

namespace {

using namespace simdev::kernels;

struct Operands {
  Operands(size_t rows_, size_t in_, size_t out_) : rows(rows_), in(in_), out(out_) {
    std::mt19937 rng(7);
    std::uniform_int_distribution<int> value(-127, 127);
    std::uniform_real_distribution<float> scale(0.001f, 0.01f);
    a.resize(rows * in);
    w.resize(out * in);
    for (auto& v : a) v = static_cast<int8_t>(value(rng));
    for (auto& v : w) v = static_cast<int8_t>(value(rng));
    a_scales.resize(rows);
    w_scales.resize(out);
    for (auto& v : a_scales) v = scale(rng);
    for (auto& v : w_scales) v = scale(rng);
    result.resize(rows * out);
  }
  size_t rows, in, out;
  std::vector<int8_t> a, w;
  std::vector<float> a_scales, w_scales, result;
};

// 0: the reference loops; 1: int8_matmul as the device calls it (Eigen from kEigenMinRows rows).
void BM_Int8Matmul(benchmark::State& state) {
  Operands m(static_cast<size_t>(state.range(1)), static_cast<size_t>(state.range(2)),
             static_cast<size_t>(state.range(3)));
  const bool dispatched = state.range(0) == 1;
  if (dispatched) {
    std::vector<float> reference(m.rows * m.out);
    int8_matmul_reference(m.a.data(), m.a_scales.data(), m.rows, m.in, m.w.data(),
                          m.w_scales.data(), m.out, reference.data());
    int8_matmul(m.a.data(), m.a_scales.data(), m.rows, m.in, m.w.data(), m.w_scales.data(), m.out,
                m.result.data());
    if (std::memcmp(reference.data(), m.result.data(), reference.size() * sizeof(float)) != 0) {
      state.SkipWithError("int8_matmul differs from int8_matmul_reference");
      return;
    }
  }
  for (auto _ : state) {
    if (dispatched) {
      int8_matmul(m.a.data(), m.a_scales.data(), m.rows, m.in, m.w.data(), m.w_scales.data(), m.out,
                  m.result.data());
    } else {
      int8_matmul_reference(m.a.data(), m.a_scales.data(), m.rows, m.in, m.w.data(),
                            m.w_scales.data(), m.out, m.result.data());
    }
    benchmark::DoNotOptimize(m.result.data());
  }
  // Multiply-accumulates per second.
  state.SetItemsProcessed(state.iterations() * static_cast<int64_t>(m.rows * m.in * m.out));
  state.SetLabel(dispatched ? (m.rows >= kEigenMinRows && eigen_available() ? "eigen" : "reference")
                            : "reference loops");
}
BENCHMARK(BM_Int8Matmul)
    ->ArgNames({"dispatched", "rows", "in", "out"})
    ->ArgsProduct({{0, 1}, {1, 8, 256}, {1024}, {3072}})
    ->Args({0, 256, 1536, 1024})  // down_proj's shard: 3072 / 2 inputs
    ->Args({1, 256, 1536, 1024})
    ->Unit(benchmark::kMicrosecond);

}  // namespace

int main(int argc, char** argv) { return calrt_bench::checked_main(argc, argv); }
