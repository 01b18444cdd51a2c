// Batch decode (calrt.h, Kv_Apply, ABI 0.8): each row of a batch-4 decode is a sequence of its
// own. What the device promises, checked through the C++ wrapper over the C table: a row gives
// what the same sequence gives decoded alone, bit for bit; idle rows are zero; each row's KV
// grows by one; every misuse of rows is refused naming the row; an ABI 0.7 caller's Kv_Apply
// means row 0; and a batch costs more than one row but less than the rows one by one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <mutex>

#include "abi/calrt.hpp"
#include "calbin/bf16.hpp"
#include "calbin/layout.hpp"
#include "simdev/gen/generate.hpp"
#include "simdev/runtime/sim_api.h"
#include "tests/simdev/device/model/decode_rig.hpp"

namespace simdev::test {
namespace {

namespace fs = std::filesystem;

constexpr uint32_t kBatch = 4;

// Generated once per process into a directory of its own (ctest runs each test in a process
// of its own, several at a time), and removed when the process ends.
struct GeneratedCalbin {
  fs::path path;
  ~GeneratedCalbin() {
    std::error_code ignored;
    if (!path.empty()) fs::remove_all(path, ignored);
  }
};

fs::path batch_calbin() {
  static std::once_flag once;
  static GeneratedCalbin generated;
  std::call_once(once, [] {
    fs::path& path = generated.path;
    path = fs::path(SIMDEV_TEST_BUILD_DIR) / "device-test-calbins" /
           ("qwen3-small-batch4-" + std::to_string(::getpid()));
    gen::GenOptions options;
    options.config_file = fs::path(CALRT_GEN_CONFIGS) / "qwen3-small-batch4.yaml";
    options.out_dir = path;
    options.with_golden = false;  // rows are checked against the same device decoding alone
    options.force = true;
    auto made = gen::generate(options);
    if (!made) ADD_FAILURE() << made.error().to_string();
  });
  return generated.path;
}

std::vector<int32_t> row_prompt(size_t length, uint32_t vocab, uint32_t salt) {
  std::vector<int32_t> tokens(length);
  for (size_t i = 0; i < length; ++i) {
    tokens[i] = static_cast<int32_t>((i * 2654435761u + salt) % vocab);
  }
  return tokens;
}

// A device with the batch calbin configured and a buffer pair per model.
struct Batch : DecodeRig {
  explicit Batch(const std::string& config = "") : DecodeRig(batch_calbin(), config) {}

  void prefill_all(const calrt::Kv& kv, const std::vector<int32_t>& prompt) {
    kv.apply(prefill_in);
    std::vector<int32_t> positions(prompt.size());
    for (size_t i = 0; i < prompt.size(); ++i) positions[i] = static_cast<int32_t>(i);
    write(prefill_in, 0, prompt);
    write(prefill_in, 1, positions);
    prefill_in.set_csr(0, prompt.size());
    prefill_in.set_csr(1, 0);
    ASSERT_EQ(run(prefill, prefill_in, prefill_out).state, calrt::JobState::completed);
  }

  // One batch decode of tokens[r] at positions[r] in row r; the whole logits tensor, logical
  // [kBatch][vocab], widened from BF16.
  std::vector<std::vector<float>> decode_rows(const std::vector<int32_t>& tokens,
                                              const std::vector<int32_t>& positions,
                                              calrt::JobStatus* status = nullptr) {
    write(decode_in, 0, tokens);
    write(decode_in, 1, positions);
    decode_in.set_csr(0, tokens.size());
    decode_in.set_csr(1, 0);
    const calrt::JobStatus done = run(decode, decode_in, decode_out);
    if (status != nullptr) *status = done;
    EXPECT_EQ(done.state, calrt::JobState::completed) << done.message;
    const calrt::TensorDesc& desc = decode.outputs[0];
    calrt::Mapping map = decode_out.map(0);
    std::vector<uint16_t> logical(kBatch * info.vocab);
    calbin::to_logical(reinterpret_cast<const uint16_t*>(map.bytes().data()), logical.data(),
                       kBatch, info.vocab, desc.tile_d0);
    std::vector<std::vector<float>> rows(kBatch, std::vector<float>(info.vocab));
    for (size_t i = 0; i < logical.size(); ++i) {
      rows[i / info.vocab][i % info.vocab] = calbin::bf16_to_f32(logical[i]);
    }
    return rows;
  }
};

calrt::Error error_of(const std::function<void()>& call) {
  try {
    call();
  } catch (const calrt::Error& error) {
    return error;
  }
  ADD_FAILURE() << "the call succeeded";
  return calrt::Error(CALRT_OK, "", "");
}

// A decode submission the device refuses: its code, and the words that name the row.
void expect_submit_refused(Batch& b, CalrtCode code, const std::string& words) {
  const calrt::Error error = error_of(
      [&] { (void)calrt::Job::submit(b.calbin, b.decode.name, b.decode_in, b.decode_out); });
  EXPECT_EQ(error.code(), code) << error.what();
  EXPECT_NE(std::string(error.what()).find(words), std::string::npos) << error.what();
}

TEST(BatchDecode, TheCalbinDescribesRowsOfItsOwn) {
  Batch b;
  EXPECT_EQ(b.info.batch, kBatch);
  EXPECT_EQ(b.info.runtime_abi, "0.8.0") << "a batch calbin needs ABI 0.8's per-row Kv_Apply";
  EXPECT_EQ(b.decode.inputs[0].shape, (std::vector<int64_t>{kBatch, 1}));
  EXPECT_EQ(b.decode.outputs[0].shape, (std::vector<int64_t>{kBatch, int64_t{b.info.vocab}}));
  EXPECT_EQ(b.prefill.inputs[0].shape[0], 1) << "a prefill carries one sequence";
}

// Four prompts of different lengths, three decode steps each: every row of every batch step
// equals the sequence decoded alone in row 0, and the rows after the live ones stay zero.
TEST(BatchDecode, EachRowIsTheSequenceDecodedAlone) {
  Batch b;
  const std::vector<size_t> lengths = {5, 9, 3, 12};
  constexpr int kSteps = 3;
  std::vector<calrt::Kv> kvs;
  std::vector<std::vector<int32_t>> prompts;
  for (uint32_t r = 0; r < kBatch; ++r) {
    prompts.push_back(row_prompt(lengths[r], b.info.vocab, 11 + r));
    kvs.push_back(calrt::Kv::allocate(b.calbin, 64));
  }
  // Alone: each sequence in row 0 of a one-row submission.
  std::vector<std::vector<std::vector<float>>> alone(kBatch);
  for (uint32_t r = 0; r < kBatch; ++r) {
    b.prefill_all(kvs[r], prompts[r]);
    kvs[r].apply(b.decode_in, 0);
    for (int step = 0; step < kSteps; ++step) {
      const auto rows = b.decode_rows({prompts[r][static_cast<size_t>(step)]},
                                      {static_cast<int32_t>(lengths[r]) + step});
      alone[r].push_back(rows[0]);
      for (uint32_t idle = 1; idle < kBatch; ++idle) {
        EXPECT_EQ(rows[idle], std::vector<float>(b.info.vocab, 0.0f)) << "idle row " << idle;
      }
    }
    EXPECT_EQ(kvs[r].info().filled_tokens, lengths[r] + kSteps);
  }
  ASSERT_NE(alone[0][0], alone[1][0]) << "the sequences must differ for the check to mean much";
  // Together: the same sequences from their prompts again, all four rows in each submission.
  for (uint32_t r = 0; r < kBatch; ++r) {
    kvs[r].clear();
    b.prefill_all(kvs[r], prompts[r]);
    kvs[r].apply(b.decode_in, r);
  }
  for (int step = 0; step < kSteps; ++step) {
    std::vector<int32_t> tokens, positions;
    for (uint32_t r = 0; r < kBatch; ++r) {
      tokens.push_back(prompts[r][static_cast<size_t>(step)]);
      positions.push_back(static_cast<int32_t>(lengths[r]) + step);
    }
    const auto rows = b.decode_rows(tokens, positions);
    for (uint32_t r = 0; r < kBatch; ++r) {
      EXPECT_EQ(rows[r], alone[r][static_cast<size_t>(step)]) << "row " << r << " step " << step;
    }
  }
  for (uint32_t r = 0; r < kBatch; ++r) {
    EXPECT_EQ(kvs[r].info().filled_tokens, lengths[r] + kSteps) << "row " << r;
  }
}

// The negative control of the check above: a device that writes each row's logits one row
// down (numerics_mutant=batch_rows_rotated) fails it.
TEST(BatchDecode, RotatedRowsAreNotTheSequencesAlone) {
  Batch b;
  Batch m("numerics_mutant=batch_rows_rotated");
  std::vector<calrt::Kv> kvs;
  std::vector<int32_t> tokens, positions;
  std::vector<std::vector<float>> alone;
  for (uint32_t r = 0; r < kBatch; ++r) {
    kvs.push_back(calrt::Kv::allocate(b.calbin, 64));
    b.prefill_all(kvs[r], row_prompt(4 + r, b.info.vocab, 3 + r));
    kvs[r].apply(b.decode_in, 0);
    tokens.push_back(static_cast<int32_t>(r + 1));
    positions.push_back(static_cast<int32_t>(4 + r));
    alone.push_back(b.decode_rows({tokens.back()}, {positions.back()})[0]);
  }
  std::vector<calrt::Kv> mutant_kvs;
  for (uint32_t r = 0; r < kBatch; ++r) {
    mutant_kvs.push_back(calrt::Kv::allocate(m.calbin, 64));
    m.prefill_all(mutant_kvs[r], row_prompt(4 + r, b.info.vocab, 3 + r));
    mutant_kvs[r].apply(m.decode_in, r);
  }
  const auto rows = m.decode_rows(tokens, positions);
  size_t differing = 0;
  for (uint32_t r = 0; r < kBatch; ++r) differing += rows[r] != alone[r] ? 1 : 0;
  EXPECT_EQ(differing, kBatch);
  EXPECT_EQ(rows[1], alone[0]) << "row 0's logits went to row 1";
}

// The negative control of the idle rows' zeros: a device that pads the batch with copies of
// its last live row and leaves the pads (numerics_mutant=batch_pads_kept) shows them.
TEST(BatchDecode, KeptPadsAreNotZero) {
  Batch m("numerics_mutant=batch_pads_kept");
  calrt::Kv kv = calrt::Kv::allocate(m.calbin, 64);
  m.prefill_all(kv, row_prompt(6, m.info.vocab, 5));
  kv.apply(m.decode_in, 0);
  const auto rows = m.decode_rows({7}, {6});
  ASSERT_NE(rows[0], std::vector<float>(m.info.vocab, 0.0f));
  for (uint32_t idle = 1; idle < kBatch; ++idle) {
    EXPECT_EQ(rows[idle], rows[0]) << "idle row " << idle << " should repeat row 0";
  }
}

TEST(BatchDecode, RowMisuseIsRefusedNamingTheRow) {
  Batch b;
  calrt::Kv a = calrt::Kv::allocate(b.calbin, 32);
  calrt::Kv c = calrt::Kv::allocate(b.calbin, 32);
  const calrt::Error past_batch = error_of([&] { a.apply(b.decode_in, kBatch); });
  EXPECT_EQ(past_batch.code(), CALRT_INVALID_ARGUMENT);
  EXPECT_NE(std::string(past_batch.what()).find("row 4"), std::string::npos) << past_batch.what();
  EXPECT_NE(std::string(past_batch.what()).find("4 row(s)"), std::string::npos);
  const calrt::Error prefill_row = error_of([&] { a.apply(b.prefill_in, 1); });
  EXPECT_EQ(prefill_row.code(), CALRT_INVALID_ARGUMENT) << "a prefill has row 0 only";

  // The same handle on two live rows: two sequences cannot share one KV.
  a.apply(b.decode_in, 0);
  a.apply(b.decode_in, 1);
  Batch::write(b.decode_in, 0, {1, 2});
  Batch::write(b.decode_in, 1, {0, 0});
  b.decode_in.set_csr(0, 2);
  expect_submit_refused(b, CALRT_INVALID_ARGUMENT, "serves rows 0 and 1");

  // A live row with no handle.
  c.apply(b.decode_in, 1);
  b.decode_in.set_csr(0, 3);
  expect_submit_refused(b, CALRT_WRONG_STATE, "row 2 has no KV handle applied");

  // cur_seq_len past the batch: refused while rows lack handles; with every row handled, the
  // job fails when it starts, naming the CSR.
  b.decode_in.set_csr(0, 5);
  expect_submit_refused(b, CALRT_WRONG_STATE, "row 2 has no KV handle applied");
  calrt::Kv d = calrt::Kv::allocate(b.calbin, 32);
  calrt::Kv e = calrt::Kv::allocate(b.calbin, 32);
  d.apply(b.decode_in, 2);
  e.apply(b.decode_in, 3);
  calrt::JobStatus status = b.run(b.decode, b.decode_in, b.decode_out);
  EXPECT_EQ(status.state, calrt::JobState::failed);
  EXPECT_EQ(status.code, CALRT_OUT_OF_RANGE);
  EXPECT_NE(status.message.find("outside [1, 4] rows"), std::string::npos) << status.message;

  // A row whose position is past its handle's capacity.
  Batch::write(b.decode_in, 0, {1, 2});
  Batch::write(b.decode_in, 1, {0, 32});
  b.decode_in.set_csr(0, 2);
  c.apply(b.decode_in, 0);
  a.apply(b.decode_in, 1);
  status = b.run(b.decode, b.decode_in, b.decode_out);
  EXPECT_EQ(status.state, calrt::JobState::failed);
  EXPECT_EQ(status.code, CALRT_OUT_OF_RANGE);
  EXPECT_NE(status.message.find("row 1: position 32 is outside the capacity 32"), std::string::npos)
      << status.message;
}

// A caller built against ABI 0.7 passes a struct that ends before `row`: whatever lies
// beyond it is not read, and the handle goes to row 0.
TEST(BatchDecode, AnAbi07KvApplyMeansRowZero) {
  Batch b;
  calrt::Kv kv = calrt::Kv::allocate(b.calbin, 32);
  auto args = calrt::detail::make_args<Calrt_Kv_Apply_Args>();
  args.struct_size = CALRT_KV_APPLY_ARGS_STRUCT_SIZE_0_7;
  args.kv = kv.get();
  args.input = b.decode_in.get();
  args.row = 7;  // beyond the struct the caller declared: never read
  EXPECT_EQ(b.api.table()->Kv_Apply(&args), nullptr);
  b.prefill_all(kv, {1, 2, 3});
  kv.apply(b.prefill_in);
  const auto rows = b.decode_rows({4}, {3});
  EXPECT_NE(rows[0], std::vector<float>(b.info.vocab, 0.0f)) << "row 0 has the handle";
  args.struct_size = CALRT_KV_APPLY_ARGS_STRUCT_SIZE_0_7 - 1;
  CalrtError* small = b.api.table()->Kv_Apply(&args);
  ASSERT_NE(small, nullptr);
  auto code = calrt::detail::make_args<Calrt_Error_GetCode_Args>();
  code.error = small;
  b.api.table()->Error_GetCode(&code);
  EXPECT_EQ(code.code, CALRT_STRUCT_TOO_SMALL);
  auto destroy = calrt::detail::make_args<Calrt_Error_Destroy_Args>();
  destroy.error = small;
  b.api.table()->Error_Destroy(&destroy);
}

// The timing model charges a batch as its rows: the weights once, the KV and the activations
// per row. Four rows take longer than one and less than four one-row steps.
TEST(BatchDecode, FourRowsCostMoreThanOneAndLessThanFourSteps) {
  Batch b;
  std::vector<calrt::Kv> kvs;
  for (uint32_t r = 0; r < kBatch; ++r) {
    kvs.push_back(calrt::Kv::allocate(b.calbin, 64));
    b.prefill_all(kvs[r], row_prompt(16, b.info.vocab, r));
    kvs[r].apply(b.decode_in, r);
  }
  auto compute_ns = [](const calrt::JobStatus& s) {
    return (s.compute_end_time - s.compute_start_time).count();
  };
  calrt::JobStatus one, four;
  (void)b.decode_rows({1}, {16}, &one);
  (void)b.decode_rows({1, 2, 3, 4}, {16, 16, 16, 16}, &four);
  EXPECT_GT(compute_ns(four), compute_ns(one));
  EXPECT_LT(compute_ns(four), 4 * compute_ns(one));
}

}  // namespace
}  // namespace simdev::test
