// The `simdev` executable as a user meets it: --version, the 0/1/2 exit codes, errors on
// stderr with stdout left to what scripts read.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace {

namespace fs = std::filesystem;

struct SimdevRun {
  int exit_code = -1;  // -1: ended by a signal
  std::string out;
  std::string err;
};

SimdevRun run_simdev(const std::string& args) {
  const fs::path err_file =
      fs::temp_directory_path() / ("simdev_tool_test_" + std::to_string(::getpid()) + ".err");
  const std::string command =
      std::string("'") + SIMDEV_EXE + "' " + args + " 2>'" + err_file.string() + "'";
  SimdevRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  char chunk[4096];
  size_t got = 0;
  while ((got = std::fread(chunk, 1, sizeof chunk, pipe)) > 0) run.out.append(chunk, got);
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_file);
  run.err.assign(std::istreambuf_iterator<char>(in), {});
  fs::remove(err_file);
  return run;
}

TEST(SimdevTool, VersionNamesTheProjectAbiAndCommit) {
  const SimdevRun run = run_simdev("--version");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out.rfind("simdev ", 0), 0u) << run.out;
  EXPECT_NE(run.out.find("runtime ABI 0."), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("commit "), std::string::npos) << run.out;
}

TEST(SimdevTool, UsageErrorsExitTwoOnStderr) {
  const fs::path existing =
      fs::temp_directory_path() / ("simdev_tool_" + std::to_string(::getpid()));
  fs::create_directories(existing);
  struct Case {
    std::string args;
    std::string mentions;
  };
  for (const Case& c :
       {Case{"gen", "--out"}, Case{"gen --preset bogus --out x", "bogus"},
        Case{"gen --out ''", "--out"}, Case{"gen --out '" + existing.string() + "'", "--force"},
        Case{"gen --preset tiny --out x --decode-top-k 0", "--decode-top-k"},
        // Found once the model is known: the tiny vocabulary of 1000 over two chips.
        Case{"gen --preset tiny --out '" + (existing / "ranked").string() + "' --decode-top-k 501",
             "--decode-top-k: 501 exceeds a chip's slice of the vocabulary (500)"},
        Case{"bogus", "bogus"}, Case{"serve --socket x.sock --runtime-dir y", "--runtime-dir"},
        Case{"serve --socket x.sock --calbin-root /nonexistent-calbin-root",
             "/nonexistent-calbin-root"},
        Case{"serve --socket x.sock --max-clients 8 --max-connections 4", "--max-connections 4"}}) {
    const SimdevRun run = run_simdev(c.args);
    EXPECT_EQ(run.exit_code, 2) << c.args << "\n" << run.out << run.err;
    EXPECT_NE(run.err.find(c.mentions), std::string::npos) << c.args << "\n" << run.err;
    EXPECT_EQ(run.out.find(c.mentions), std::string::npos)
        << c.args << ": the error went to stdout\n"
        << run.out;
  }
  // The directory that was refused is untouched, and a refused calbin left nothing behind.
  EXPECT_TRUE(fs::is_empty(existing));
  fs::remove_all(existing);
}

TEST(SimdevTool, PresetsGoToStdout) {
  const SimdevRun run = run_simdev("presets");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("tiny"), std::string::npos) << run.out;
}

}  // namespace

// Ctrl-C while a calbin is generated: the half-written OUT.tmp-PID directory goes with the
// process, which ends by the signal, and OUT never appears. A 28-layer golden takes seconds,
// so the directory is there long enough to be seen before the signal is sent.
TEST(SimdevTool, AnInterruptedGenLeavesNothingBehind) {
  const fs::path dir =
      fs::temp_directory_path() / ("simdev_interrupt_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path out = dir / "calbin";
  const std::string config = std::string(CALRT_GEN_CONFIGS) + "/qwen3-deep-28.yaml";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::execl(SIMDEV_EXE, SIMDEV_EXE, "gen", "--config", config.c_str(), "--out", out.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  fs::path staging = out;
  staging += ".tmp-" + std::to_string(child);
  bool seen = false;
  for (int i = 0; i < 2000 && !seen; ++i) {  // up to 20 s
    seen = fs::exists(staging);
    if (!seen) ::usleep(10000);
  }
  ASSERT_TRUE(seen) << staging;
  ASSERT_EQ(::kill(child, SIGINT), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT) << "status " << status;
  EXPECT_FALSE(fs::exists(staging)) << staging;
  EXPECT_FALSE(fs::exists(out)) << out;
  fs::remove_all(dir);
}
