// A decode that ranks on the device (calrt.h, CALRT_ROLE_TOP_IDS, ABI 0.9): each row gives its
// K best ids and their logits instead of the full row. The golden is an independent path: the
// same model packaged with full rows (same config, same seed, so the same weights), decoded on
// a device of its own, its BF16 rows ranked here by a plain stable sort. Checked on a batch-4
// calbin so that rows, idle rows and ranking meet; the mutant top_k_local_ids must differ.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <numeric>

#include "abi/calrt.hpp"
#include "calbin/bf16.hpp"
#include "calbin/layout.hpp"
#include "simdev/gen/generate.hpp"
#include "simdev/runtime/sim_api.h"
#include "tests/simdev/device/model/decode_rig.hpp"

namespace simdev::test {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kRankedRows = 4;
constexpr uint32_t kRankedK = 16;

struct RankedCalbins {
  fs::path full, ranked;
  ~RankedCalbins() {
    std::error_code ignored;
    if (!full.empty()) fs::remove_all(full.parent_path(), ignored);
  }
};

const RankedCalbins& ranked_calbins() {
  static std::once_flag once;
  static RankedCalbins made;
  std::call_once(once, [] {
    const fs::path dir = fs::path(SIMDEV_TEST_BUILD_DIR) / "device-test-calbins" /
                         ("ranked-" + std::to_string(::getpid()));
    for (const uint32_t k : {0u, kRankedK}) {
      gen::GenOptions options;
      options.config_file = fs::path(CALRT_GEN_CONFIGS) / "qwen3-small-batch4.yaml";
      options.out_dir = dir / (k == 0 ? "full" : "ranked");
      options.with_golden = false;
      options.force = true;
      options.decode_top_k = k;
      if (auto generated = gen::generate(options); !generated) {
        ADD_FAILURE() << generated.error().to_string();
      }
      (k == 0 ? made.full : made.ranked) = options.out_dir;
    }
  });
  return made;
}

std::vector<int32_t> ranked_prompt(size_t length, uint32_t vocab, uint32_t salt) {
  std::vector<int32_t> tokens(length);
  for (size_t i = 0; i < length; ++i) tokens[i] = static_cast<int32_t>((i * 40503u + salt) % vocab);
  return tokens;
}

// One device with one calbin; prefill then one batch decode of four sequences.
struct RankedRig : DecodeRig {
  RankedRig(const fs::path& calbin_dir, const std::string& config)
      : DecodeRig(calbin_dir, config) {}

  void finish(const calrt::ModelDesc& model, calrt::Buffer& in, calrt::Buffer& out) {
    const calrt::JobStatus status = run(model, in, out);
    ASSERT_EQ(status.state, calrt::JobState::completed) << status.message;
  }

  // `live` sequences of different lengths prefilled, then one decode with a row each.
  void decode_sequences(uint32_t live) {
    std::vector<int32_t> tokens, positions;
    for (uint32_t r = 0; r < live; ++r) {
      const std::vector<int32_t> prompt = ranked_prompt(5 + 4 * r, info.vocab, 7 + r);
      kvs.push_back(calrt::Kv::allocate(calbin, 64));
      kvs.back().apply(prefill_in);
      std::vector<int32_t> at(prompt.size());
      std::iota(at.begin(), at.end(), 0);
      write(prefill_in, 0, prompt);
      write(prefill_in, 1, at);
      prefill_in.set_csr(0, prompt.size());
      prefill_in.set_csr(1, 0);
      finish(prefill, prefill_in, prefill_out);
      kvs.back().apply(decode_in, r);
      tokens.push_back(prompt.back());
      positions.push_back(static_cast<int32_t>(prompt.size()));
    }
    write(decode_in, 0, tokens);
    write(decode_in, 1, positions);
    decode_in.set_csr(0, live);
    decode_in.set_csr(1, 0);
    finish(decode, decode_in, decode_out);
  }

  std::vector<calrt::Kv> kvs;
};

// The full-row rig's logits row `r` as BF16 words, logical order.
std::vector<uint16_t> full_row(RankedRig& rig, uint32_t r) {
  const calrt::TensorDesc& desc = rig.decode.outputs[0];
  calrt::Mapping map = rig.decode_out.map(0);
  std::vector<uint16_t> logical(size_t{kRankedRows} * rig.info.vocab);
  calbin::to_logical(reinterpret_cast<const uint16_t*>(map.bytes().data()), logical.data(),
                     kRankedRows, rig.info.vocab, desc.tile_d0);
  return {logical.begin() + r * rig.info.vocab, logical.begin() + (r + 1) * rig.info.vocab};
}

struct RankedRow {
  std::vector<int32_t> ids;
  std::vector<uint16_t> values;
};

RankedRow device_ranking(RankedRig& rig, uint32_t r) {
  RankedRow row{std::vector<int32_t>(kRankedK), std::vector<uint16_t>(kRankedK)};
  calrt::Mapping ids = rig.decode_out.map(0);
  calrt::Mapping values = rig.decode_out.map(1);
  std::memcpy(row.ids.data(), ids.bytes().data() + r * kRankedK * sizeof(int32_t),
              kRankedK * sizeof(int32_t));
  std::memcpy(row.values.data(), values.bytes().data() + r * kRankedK * sizeof(uint16_t),
              kRankedK * sizeof(uint16_t));
  return row;
}

// The host's ranking: a stable sort by value, best first, so equal values keep id order.
RankedRow host_ranking(const std::vector<uint16_t>& row) {
  std::vector<int32_t> order(row.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return calbin::bf16_to_f32(row[static_cast<size_t>(a)]) >
           calbin::bf16_to_f32(row[static_cast<size_t>(b)]);
  });
  RankedRow out;
  for (uint32_t j = 0; j < kRankedK; ++j) {
    out.ids.push_back(order[j]);
    out.values.push_back(row[static_cast<size_t>(order[j])]);
  }
  return out;
}

TEST(RankedDecode, TheCalbinDescribesRankedOutputs) {
  RankedRig rig(ranked_calbins().ranked, "");
  EXPECT_EQ(rig.info.runtime_abi, "0.9.0") << "the top-k roles came in ABI 0.9";
  ASSERT_EQ(rig.decode.outputs.size(), 2u);
  EXPECT_EQ(rig.decode.outputs[0].role, calrt::TensorRole::top_ids);
  EXPECT_EQ(rig.decode.outputs[0].dtype, calrt::Dtype::int32);
  EXPECT_EQ(rig.decode.outputs[0].shape, (std::vector<int64_t>{kRankedRows, kRankedK}));
  EXPECT_EQ(rig.decode.outputs[1].role, calrt::TensorRole::top_logits);
  EXPECT_EQ(rig.decode.outputs[1].dtype, calrt::Dtype::bf16);
  EXPECT_EQ(rig.prefill.outputs[0].role, calrt::TensorRole::logits) << "prefill keeps its row";
}

// Three live rows of four: each live row is the full row's host ranking, ids and BF16 bits;
// the idle row is zero.
TEST(RankedDecode, EachRowIsTheFullRowRankedOnTheHost) {
  RankedRig full(ranked_calbins().full, "");
  RankedRig ranked(ranked_calbins().ranked, "");
  constexpr uint32_t kLive = 3;
  full.decode_sequences(kLive);
  ranked.decode_sequences(kLive);
  for (uint32_t r = 0; r < kLive; ++r) {
    const RankedRow expected = host_ranking(full_row(full, r));
    const RankedRow got = device_ranking(ranked, r);
    EXPECT_EQ(got.ids, expected.ids) << "row " << r;
    EXPECT_EQ(got.values, expected.values) << "row " << r;
  }
  const RankedRow idle = device_ranking(ranked, kLive);
  EXPECT_EQ(idle.ids, std::vector<int32_t>(kRankedK, 0));
  EXPECT_EQ(idle.values, std::vector<uint16_t>(kRankedK, 0));
}

// The negative control: ids local to each chip's slice of the vocabulary. Every id falls in
// the first slice, and some row ranks a token of the second slice, so some id is wrong.
TEST(RankedDecode, LocalIdsMutantGivesWrongIds) {
  RankedRig full(ranked_calbins().full, "");
  RankedRig mutant(ranked_calbins().ranked, "numerics_mutant=top_k_local_ids");
  full.decode_sequences(kRankedRows);
  mutant.decode_sequences(kRankedRows);
  const auto slice = static_cast<int32_t>(mutant.info.vocab / 2);
  bool any_wrong = false;
  for (uint32_t r = 0; r < kRankedRows; ++r) {
    const RankedRow expected = host_ranking(full_row(full, r));
    const RankedRow got = device_ranking(mutant, r);
    EXPECT_EQ(got.values, expected.values) << "the mutant keeps the values; row " << r;
    for (const int32_t id : got.ids) EXPECT_LT(id, slice);
    any_wrong |= got.ids != expected.ids;
  }
  EXPECT_TRUE(any_wrong);
}

}  // namespace
}  // namespace simdev::test
