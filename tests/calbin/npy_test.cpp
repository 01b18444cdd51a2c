// .npy reading and writing, interoperability with NumPy's exact bytes, and bad files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "calbin/npy.hpp"
#include "test_util.hpp"

namespace calbin {
namespace {

using testing::read_text;
using testing::TempDir;
using testing::write_text;

// The preamble NumPy >= 1.23 writes for np.zeros((2, 3), '<f4'): version 1.0, header length
// 118 (0x76), the dict, 20 spaces of room to grow the first axis (GROWTH_AXIS_MAX_DIGITS 21
// minus one digit), 38 spaces to align the data to 64 bytes, and '\n'.
const std::string kNumpyF32x2x3 = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                                  "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" +
                                  std::string(58, ' ') + "\n";

std::string f32_bytes(const std::vector<float>& values) {
  std::string bytes(values.size() * 4, '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// A file with the given version and header dict; the length field is computed, no padding.
std::string npy_file(int major, const std::string& dict, const std::string& data) {
  std::string file = std::string("\x93NUMPY", 6) + static_cast<char>(major) + '\0';
  const size_t length = dict.size();
  const size_t length_bytes = major == 1 ? 2 : 4;
  for (size_t i = 0; i < length_bytes; ++i) {
    file += static_cast<char>((length >> (8 * i)) & 0xFF);
  }
  return file + dict + data;
}

std::string read_error(const TempDir& dir, const std::string& content) {
  write_text(dir / "bad.npy", content);
  const Result<NpyArray> array = read_npy(dir / "bad.npy");
  EXPECT_FALSE(array) << "accepted a bad .npy file";
  if (array) {
    return "";
  }
  EXPECT_EQ(array.error().file, (dir / "bad.npy").string());
  return array.error().to_string();
}

const std::string kF4Dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\n";

TEST(Npy, WriterMatchesNumpyByteForByte) {
  TempDir dir;
  const std::vector<float> values{1, 2, 3, 4, 5, 6.5f};
  ASSERT_TRUE(write_npy_f32(dir / "a.npy", {2, 3}, values));
  const std::string file = read_text(dir / "a.npy");
  EXPECT_EQ(file, kNumpyF32x2x3 + f32_bytes(values));
}

TEST(Npy, DataStartsOnA64ByteBoundary) {
  TempDir dir;
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{}, {1}, {7}, {123456}, {2, 3, 2, 3, 2, 3, 2, 3, 2, 3}}) {
    NpyArray array{"|i1", shape, {}};
    array.data.resize(static_cast<size_t>(array.element_count()));
    ASSERT_TRUE(write_npy(dir / "s.npy", array));
    const std::string file = read_text(dir / "s.npy");
    const size_t header_length =
        static_cast<uint8_t>(file[8]) | static_cast<size_t>(static_cast<uint8_t>(file[9]) << 8);
    EXPECT_EQ((10 + header_length) % 64, 0u);
    EXPECT_EQ(file[9 + header_length], '\n');
    EXPECT_EQ(file.size(), 10 + header_length + array.data.size());
  }
}

TEST(Npy, ReadsWhatNumpyWrites) {
  TempDir dir;
  const std::vector<float> values{1, 2, 3, 4, 5, 6};
  write_text(dir / "n.npy", kNumpyF32x2x3 + f32_bytes(values));
  std::vector<int64_t> shape;
  const Result<std::vector<float>> read = read_npy_f32(dir / "n.npy", &shape);
  ASSERT_TRUE(read) << read.error().to_string();
  EXPECT_EQ(shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(*read, values);
}

TEST(Npy, RoundTripOfEveryAcceptedDtype) {
  TempDir dir;
  for (const auto& [descr, item] : std::vector<std::pair<std::string, size_t>>{
           {"<f4", 4}, {"<i4", 4}, {"|i1", 1}, {"<i1", 1}, {"<u2", 2}, {"<i8", 8}, {"<f8", 8}}) {
    NpyArray array{descr, {2, 2}, std::vector<uint8_t>(4 * item)};
    for (size_t i = 0; i < array.data.size(); ++i) {
      array.data[i] = static_cast<uint8_t>(i * 7 + 1);
    }
    ASSERT_TRUE(write_npy(dir / "r.npy", array)) << descr;
    const Result<NpyArray> read = read_npy(dir / "r.npy");
    ASSERT_TRUE(read) << read.error().to_string();
    EXPECT_EQ(read->descr, descr);
    EXPECT_EQ(read->shape, array.shape);
    EXPECT_EQ(read->data, array.data);
  }
}

TEST(Npy, ScalarAndEmptyArrays) {
  TempDir dir;
  ASSERT_TRUE(write_npy_i32(dir / "scalar.npy", {}, {42}));
  std::vector<int64_t> shape{9};
  const Result<std::vector<int32_t>> scalar = read_npy_i32(dir / "scalar.npy", &shape);
  ASSERT_TRUE(scalar) << scalar.error().to_string();
  EXPECT_TRUE(shape.empty());
  EXPECT_EQ(*scalar, std::vector<int32_t>{42});

  ASSERT_TRUE(write_npy_f32(dir / "empty.npy", {0, 5}, {}));
  const Result<std::vector<float>> empty = read_npy_f32(dir / "empty.npy", &shape);
  ASSERT_TRUE(empty) << empty.error().to_string();
  EXPECT_EQ(shape, (std::vector<int64_t>{0, 5}));
  EXPECT_TRUE(empty->empty());
}

TEST(Npy, ReadsVersions2And3) {
  TempDir dir;
  const std::string data = f32_bytes({1, 2, 3});
  for (const int major : {2, 3}) {
    write_text(dir / "v.npy", npy_file(major, kF4Dict, data));
    const Result<std::vector<float>> read = read_npy_f32(dir / "v.npy");
    ASSERT_TRUE(read) << "version " << major << ": " << read.error().to_string();
    EXPECT_EQ(*read, (std::vector<float>{1, 2, 3}));
  }
}

TEST(Npy, HeaderDictVariantsParse) {
  TempDir dir;
  const std::string data = f32_bytes({1, 2, 3, 4, 5, 6});
  for (const std::string dict : {
           "{'descr':'<f4','fortran_order':False,'shape':(2,3)}",
           "{ 'shape' : ( 2 , 3 , ) , 'fortran_order' : False , 'descr' : '<f4' , }   \n",
           "{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (2L, 3L), }\n",
       }) {
    write_text(dir / "h.npy", npy_file(1, dict, data));
    std::vector<int64_t> shape;
    const Result<std::vector<float>> read = read_npy_f32(dir / "h.npy", &shape);
    ASSERT_TRUE(read) << dict << ": " << read.error().to_string();
    EXPECT_EQ(shape, (std::vector<int64_t>{2, 3}));
  }
}

TEST(Npy, RejectsBadMagicAndVersions) {
  TempDir dir;
  EXPECT_NE(read_error(dir, std::string("NOTNPY\x01\x00\x10\x00", 10)).find("bad magic"),
            std::string::npos);
  EXPECT_NE(read_error(dir, "").find("file ends inside the magic"), std::string::npos);
  EXPECT_NE(read_error(dir, npy_file(4, kF4Dict, f32_bytes({1, 2, 3})))
                .find("unsupported .npy version 4.0"),
            std::string::npos);
}

TEST(Npy, RejectsHeaderLengthPastTheEnd) {
  TempDir dir;
  std::string file = npy_file(2, kF4Dict, "");
  file[8] = '\xff';
  file[9] = '\xff';
  file[10] = '\xff';
  file[11] = '\x7f';
  EXPECT_NE(read_error(dir, file).find("runs past the end"), std::string::npos);
}

TEST(Npy, RejectsUnsupportedHeaderContents) {
  TempDir dir;
  const std::string data = f32_bytes({1, 2, 3});
  auto error_for = [&](const std::string& dict) {
    return read_error(dir, npy_file(1, dict, data));
  };
  EXPECT_NE(error_for("{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }")
                .find("descr: unsupported dtype '>f4'"),
            std::string::npos);
  EXPECT_NE(
      error_for("{'descr': '<f4', 'fortran_order': True, 'shape': (3,), }").find("fortran_order"),
      std::string::npos);
  EXPECT_NE(
      error_for("{'descr': '<f4', 'fortran_order': False, 'shape': (3), }").find("not a tuple"),
      std::string::npos);
  EXPECT_NE(error_for("{'descr': '<f4', 'fortran_order': False, 'shape': (-3,), }")
                .find("negative dimension"),
            std::string::npos);
  EXPECT_NE(error_for("{'descr': '<f4', 'shape': (3,), }").find("needs the keys"),
            std::string::npos);
  EXPECT_NE(error_for("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}")
                .find("unexpected key 'x'"),
            std::string::npos);
  EXPECT_NE(error_for("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}")
                .find("duplicate key"),
            std::string::npos);
  EXPECT_NE(error_for("{'descr': '<f4' 'fortran_order': False}").find("expected '}'"),
            std::string::npos);
  EXPECT_NE(error_for("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}")
                .find("overflows"),
            std::string::npos);
  EXPECT_NE(error_for("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, "
                      "4294967296, 4294967296)}")
                .find("overflows"),
            std::string::npos);
  std::string many_dims;
  for (int i = 0; i < 40; ++i) {
    many_dims += "1, ";
  }
  EXPECT_NE(error_for("{'descr': '<f4', 'fortran_order': False, 'shape': (" + many_dims + ")}")
                .find("rank exceeds the maximum of 32"),
            std::string::npos);
}

TEST(Npy, RejectsTruncatedAndOversizedData) {
  TempDir dir;
  const std::string full = npy_file(1, kF4Dict, f32_bytes({1, 2, 3}));
  const std::string truncated = read_error(dir, full.substr(0, full.size() - 1));
  EXPECT_NE(truncated.find("bad.npy"), std::string::npos);
  EXPECT_NE(truncated.find("data is 11 bytes but shape [3] of '<f4' needs 12 (truncated)"),
            std::string::npos)
      << truncated;
  EXPECT_NE(read_error(dir, full + "x").find("(trailing bytes)"), std::string::npos);
}

TEST(Npy, TypedReadersAreStrictAboutDtype) {
  TempDir dir;
  ASSERT_TRUE(write_npy_i32(dir / "i.npy", {2}, {1, 2}));
  const Result<std::vector<float>> as_float = read_npy_f32(dir / "i.npy");
  ASSERT_FALSE(as_float);
  EXPECT_EQ(as_float.error().field, "descr");
  EXPECT_NE(as_float.error().message.find("'<i4' but '<f4' is required"), std::string::npos);
  ASSERT_TRUE(write_npy(dir / "f8.npy", NpyArray{"<f8", {1}, std::vector<uint8_t>(8)}));
  EXPECT_FALSE(read_npy_f32(dir / "f8.npy"));
  EXPECT_FALSE(read_npy_i32(dir / "f8.npy"));
}

TEST(Npy, WriterRefusesInconsistentArrays) {
  TempDir dir;
  EXPECT_FALSE(write_npy_f32(dir / "w.npy", {2, 3}, {1, 2, 3}));
  EXPECT_FALSE(write_npy(dir / "w.npy", NpyArray{"<c8", {1}, std::vector<uint8_t>(8)}));
  EXPECT_FALSE(write_npy(dir / "w.npy", NpyArray{"<f4", {-1}, {}}));
  EXPECT_FALSE(std::filesystem::exists(dir / "w.npy"));
}

TEST(Npy, MissingFileIsAnError) {
  TempDir dir;
  const Result<NpyArray> array = read_npy(dir / "missing.npy");
  ASSERT_FALSE(array);
  EXPECT_NE(array.error().to_string().find("missing.npy"), std::string::npos);
}

// Only runs where NumPy is installed; the byte-exact test above covers interop otherwise.
TEST(Npy, NumpyLoadsOurFilesAndWeLoadItsFiles) {
  const std::string python = CALRT_PYTHON3;
  if (std::system((python + " -c 'import numpy' >/dev/null 2>&1").c_str()) != 0) {
    GTEST_SKIP() << "python3 with numpy not available";
  }
  TempDir dir;
  ASSERT_TRUE(write_npy_f32(dir / "ours.npy", {2, 3}, {1, 2, 3, 4, 5, 6}));
  const std::string script =
      "import numpy as np, sys; d = sys.argv[1]; a = np.load(d + '/ours.npy'); "
      "assert a.shape == (2, 3) and a.dtype == np.float32 and a[1, 2] == 6; "
      "np.save(d + '/theirs.npy', np.arange(12, dtype=np.int32).reshape(3, 4))";
  ASSERT_EQ(std::system((python + " -c \"" + script + "\" '" + dir.path().string() + "'").c_str()),
            0);
  std::vector<int64_t> shape;
  const Result<std::vector<int32_t>> theirs = read_npy_i32(dir / "theirs.npy", &shape);
  ASSERT_TRUE(theirs) << theirs.error().to_string();
  EXPECT_EQ(shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ((*theirs)[11], 11);
}

}  // namespace
}  // namespace calbin
