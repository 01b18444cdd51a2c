// Generates calbins (tiny ones without the long golden cases) into a per-process temporary
// directory for the tests that need one.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>
#include <unistd.h>

#include "simdev/gen/generate.hpp"

namespace simdev::gen::testing {

// The path lives in a never-destroyed object, so the exit handler can still read it.
inline const std::filesystem::path& scratch_root() {
  static const std::filesystem::path* const root = [] {
    auto* path = new std::filesystem::path(std::filesystem::temp_directory_path() /
                                           ("gen_tests-" + std::to_string(::getpid())));
    std::filesystem::remove_all(*path);
    std::filesystem::create_directories(*path);
    // ctest runs every test in its own process; each removes its own directory on exit.
    std::atexit([] {
      std::error_code ignored;
      std::filesystem::remove_all(scratch_root(), ignored);
    });
    return path;
  }();
  return *root;
}

inline GenOptions preset_options(const std::string& preset, const std::string& dir_name,
                                 uint64_t seed) {
  GenOptions options;
  options.preset = preset;
  options.out_dir = scratch_root() / dir_name;
  options.seed = seed;
  options.long_cases = false;
  options.force = true;
  options.command_line = "gen_tests";  // fixed, so manifests of equal seeds are identical
  return options;
}

inline GenOptions tiny_options(const std::string& dir_name, uint64_t seed) {
  return preset_options("tiny", dir_name, seed);
}

// The seed-1 calbin, generated once per process.
inline const std::filesystem::path& tiny_calbin() {
  static const std::filesystem::path dir = [] {
    const GenOptions options = tiny_options("tiny-seed1", 1);
    const auto manifest = generate(options);
    EXPECT_TRUE(manifest.has_value()) << manifest.error().to_string();
    return options.out_dir;
  }();
  return dir;
}

}  // namespace simdev::gen::testing
