// A test fixture with a `simdev serve` daemon of its own, started on demand in a scratch
// directory named after the test, and the client runtime's table for its socket.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "daemon_process.hpp"
#include "tests/simdev/service/client/client_session.hpp"

namespace calrt_test {

class DaemonClientTest : public ::testing::Test {
 protected:
  void start(std::vector<std::string> args = {}) {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::temp_directory_path() /
           ("calrt_client_" + std::to_string(::getpid()) + "_" + info->name());
    std::filesystem::remove_all(dir_);
    DaemonOptions options;
    options.extra_args = std::move(args);
    daemon_ = std::make_unique<DaemonProcess>(dir_, options);
    api_ = client_api(daemon_->endpoint());
  }
  void TearDown() override {
    daemon_.reset();
    ::unsetenv("CALRT_TOKEN_FILE");  // a --tcp daemon sets it for the test's clients
    std::filesystem::remove_all(dir_);
  }

  std::filesystem::path dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  calrt::Api api_;
};

}  // namespace calrt_test
