// The report writer against the paths users hand it: special files are written in place and
// never replaced, regular files and symlinks to them atomically, and a failure leaves no
// temporary file and names the user's path.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "runner/core/report/output_file.hpp"

namespace fs = std::filesystem;

namespace {

class OutputFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("calrt_output_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  static std::string read(const fs::path& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  // Nothing but `expected` in the directory: no temporary file left behind.
  void expect_only(std::initializer_list<std::string> expected) const {
    std::set<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_)) names.insert(entry.path().filename());
    EXPECT_EQ(names, std::set<std::string>(expected));
  }

  fs::path dir_;
};

TEST_F(OutputFile, NewAndExistingRegularFilesAreReplacedWhole) {
  const fs::path report = dir_ / "report.json";
  EXPECT_EQ(runner::write_text_file(report, "one\n"), "");
  EXPECT_EQ(read(report), "one\n");
  EXPECT_EQ(runner::write_text_file(report, "two\n"), "");
  EXPECT_EQ(read(report), "two\n");
  expect_only({"report.json"});
}

TEST_F(OutputFile, ACharacterDeviceIsWrittenInPlaceNotReplaced) {
  struct stat before {};
  ASSERT_EQ(::stat("/dev/null", &before), 0);
  EXPECT_EQ(runner::write_text_file("/dev/null", "{}\n"), "");
  struct stat after {};
  ASSERT_EQ(::stat("/dev/null", &after), 0);
  EXPECT_TRUE(S_ISCHR(after.st_mode));
  EXPECT_EQ(before.st_ino, after.st_ino);
}

TEST_F(OutputFile, ASymlinkToADeviceStaysASymlink) {
  const fs::path link = dir_ / "out";
  fs::create_symlink("/dev/null", link);
  EXPECT_EQ(runner::write_text_file(link, "{}\n"), "");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
  expect_only({"out"});
}

TEST_F(OutputFile, ASymlinkToARegularFileReplacesItsTargetAndKeepsTheLink) {
  const fs::path target = dir_ / "target.json";
  const fs::path link = dir_ / "link.json";
  std::ofstream(target) << "old\n";
  fs::create_symlink(target, link);
  EXPECT_EQ(runner::write_text_file(link, "new\n"), "");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(link)));
  EXPECT_EQ(read(target), "new\n");
  expect_only({"target.json", "link.json"});
}

TEST_F(OutputFile, AFifoWithoutAReaderFailsAtOnce) {
  const fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string problem = runner::write_text_file(fifo, "{}\n");
  EXPECT_NE(problem.find(fifo.string()), std::string::npos) << problem;
  EXPECT_NE(problem.find("No such device"), std::string::npos) << problem;  // ENXIO
  expect_only({"fifo"});
}

TEST_F(OutputFile, AFileSizeLimitFailsTheWriteAndLeavesNothing) {
  const fs::path report = dir_ / "big.json";
  // In a child: the limit and the ignored SIGXFSZ (calrt's main ignores it too) stay there.
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit limit{1000, 1000};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    const std::string problem = runner::write_text_file(report, std::string(5000, 'x'));
    const bool ok = problem.find(report.string()) != std::string::npos &&
                    problem.find("File too large") != std::string::npos;
    ::_exit(ok ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the message lacks the path or EFBIG's text";
  expect_only({});
}

TEST_F(OutputFile, ChecksBeforeAnyWork) {
  EXPECT_NE(runner::check_output_path("--json", ""), "");
  EXPECT_NE(runner::check_output_path("--json", dir_), "");
  EXPECT_NE(runner::check_output_path("--json", dir_ / "missing" / "r.json"), "");
  EXPECT_EQ(runner::check_output_path("--json", dir_ / "r.json"), "");
  EXPECT_EQ(runner::check_output_path("--json", "-"), "");
  const fs::path calbin = dir_ / "calbin";
  fs::create_directories(calbin);
  const std::string inside = runner::check_output_path("--json", calbin / "manifest.json", calbin);
  EXPECT_NE(inside.find("inside the calbin"), std::string::npos) << inside;
  EXPECT_EQ(runner::check_output_path("--json", dir_ / "r.json", calbin), "");
}

// /proc takes no new file from any user, root included: a directory that exists and that a
// report cannot be written into, found before the run instead of after it.
TEST_F(OutputFile, AReportThatCannotBeWrittenIsFoundBeforeTheRun) {
  const std::string why = runner::check_output_path("--junit", "/proc/calrt-report.xml");
  EXPECT_NE(why.find("--junit '/proc/calrt-report.xml'"), std::string::npos) << why;
  EXPECT_NE(why.find("cannot create a file in '/proc'"), std::string::npos) << why;
  // A special file is written in place: it must be writable itself.
  EXPECT_EQ(runner::check_output_path("--json", "/dev/null"), "");
  const std::string version = runner::check_output_path("--json", "/proc/version");
  EXPECT_NE(version.find("/proc"), std::string::npos) << version;
  // The probe leaves nothing behind where it may write.
  EXPECT_EQ(runner::check_output_path("--json", dir_ / "r.json"), "");
  expect_only({});
}

}  // namespace
