// The loader (abi/calrt_loader.hpp): each way a runtime library can be wrong gives a typed
// LoadError naming the path; the simulator's library loads and works.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "abi/calrt_loader.hpp"

namespace {

void expect_load_error(const std::string& path, calrt::LoadErrorKind kind,
                       const std::string& detail) {
  try {
    calrt::load_runtime(path);
    FAIL() << "expected a LoadError for " << path;
  } catch (const calrt::LoadError& error) {
    EXPECT_EQ(error.kind(), kind) << error.what();
    EXPECT_EQ(error.origin(), path);
    const std::string what = error.what();
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(detail), std::string::npos) << what;
  }
}

TEST(Loader, MissingFile) {
  expect_load_error("/nonexistent/libcalrt_nothing.so", calrt::LoadErrorKind::open_failed,
                    "No such file");
}

TEST(Loader, NotASharedLibrary) {
  expect_load_error(CALRT_TEST_NOT_A_LIBRARY, calrt::LoadErrorKind::open_failed, "");
}

// A FIFO would block dlopen forever (nobody writes it); a directory or a device is no
// library either. Each is refused before dlopen, at once.
TEST(Loader, SpecialFilesAreRefusedBeforeDlopen) {
  const std::string fifo =
      (std::filesystem::temp_directory_path() / ("calrt_loader_fifo_" + std::to_string(::getpid())))
          .string();
  std::filesystem::remove(fifo);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_load_error(fifo, calrt::LoadErrorKind::open_failed, "not a regular file");
  std::filesystem::remove(fifo);
  expect_load_error("/dev/zero", calrt::LoadErrorKind::open_failed, "not a regular file");
  expect_load_error(std::filesystem::temp_directory_path().string(),
                    calrt::LoadErrorKind::open_failed, "a directory");
}

TEST(Loader, LibraryWithoutTheEntryPoint) {
  expect_load_error(CALRT_FAKE_NOSYM, calrt::LoadErrorKind::symbol_missing, "CalrtGetApi");
}

TEST(Loader, RuntimeWithoutOurMajor) {
  expect_load_error(CALRT_FAKE_NULL, calrt::LoadErrorKind::no_table, "ABI major version 0");
}

TEST(Loader, TableClaimsAnotherMajor) {
  expect_load_error(CALRT_FAKE_WRONG_MAJOR, calrt::LoadErrorKind::abi_mismatch, "99");
}

TEST(Loader, ImplausibleStructSize) {
  expect_load_error(CALRT_FAKE_BAD_SIZE, calrt::LoadErrorKind::bad_table, "struct_size 8");
}

TEST(Loader, MinimalTableLoadsAndMissingEntriesAreUnimplemented) {
  const calrt::Api api = calrt::load_runtime(CALRT_FAKE_MINIMAL);
  ASSERT_TRUE(api);
  try {
    calrt::Device::create(api, calrt::DeviceKind::sim);
    FAIL() << "expected UNIMPLEMENTED";
  } catch (const calrt::Error& error) {
    EXPECT_EQ(error.code(), CALRT_UNIMPLEMENTED);
    EXPECT_EQ(error.function(), "Device_Create");
  }
}

TEST(Loader, ValidateTableRejectsNull) {
  EXPECT_THROW(calrt::validate_table(nullptr, CALRT_ABI_MAJOR, "test"), calrt::LoadError);
}

TEST(Loader, SimulatorLibraryLoadsAndOpensADevice) {
#ifdef CALRT_SIM_SO
  const calrt::Api api = calrt::load_runtime(CALRT_SIM_SO);
  ASSERT_TRUE(api);
  EXPECT_EQ(api.table()->abi_major, static_cast<uint32_t>(CALRT_ABI_MAJOR));
  const calrt::Device device = calrt::Device::create(api, calrt::DeviceKind::sim, 0, "seed=1");
  const calrt::DeviceStatus status = device.status();
  EXPECT_EQ(status.state, calrt::DeviceState::open);
  EXPECT_EQ(status.abi_major, static_cast<uint32_t>(CALRT_ABI_MAJOR));
  EXPECT_GE(status.chip_count, 1u);
  for (uint32_t chip = 0; chip < status.chip_count; ++chip) {
    EXPECT_GT(device.chip_status(chip).dram_total_bytes, 0u);
  }
  try {
    (void)device.chip_status(status.chip_count);
    FAIL() << "expected OUT_OF_RANGE";
  } catch (const calrt::Error& error) {
    EXPECT_EQ(error.code(), CALRT_OUT_OF_RANGE);
  }
#else
  GTEST_SKIP() << "libcalrt_sim.so is not part of this build";
#endif
}

}  // namespace
