// The vendor-shim skeleton (abi/shim_skeleton/): it loads through the real loader, fills
// every table entry, validates arguments exactly as abi/VENDOR_SHIM.md says, answers
// UNIMPLEMENTED naming the SDK call where the SDK is not wired, and survives any input.
// And the guide itself: every `calrt SUB --option` in its code blocks exists in the runner.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "abi/calrt.h"
#include "abi/calrt_loader.hpp"

namespace {

const CalrtApi* skeleton_table(uint32_t major) {
  void* library = dlopen(CALRT_SHIM_SKELETON_SO, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (library == nullptr) {
    ADD_FAILURE() << "dlopen " << CALRT_SHIM_SKELETON_SO << ": " << dlerror();
    return nullptr;
  }
  void* symbol = dlsym(library, CALRT_GET_API_SYMBOL);
  if (symbol == nullptr) {
    ADD_FAILURE() << "no " << CALRT_GET_API_SYMBOL << " in " << CALRT_SHIM_SKELETON_SO;
    return nullptr;
  }
  return reinterpret_cast<CalrtGetApiFn*>(symbol)(major);
}

struct Outcome {
  CalrtCode code = CALRT_OK;
  std::string message;
};

// Calls one entry and turns its error into a code and message, releasing the error.
template <class Args>
Outcome call(const CalrtApi* api, CalrtError* (*entry)(Args*), Args* args) {
  CalrtError* error = entry(args);
  Outcome outcome;
  if (error == nullptr) {
    return outcome;
  }
  Calrt_Error_GetCode_Args code{CALRT_ERROR_GETCODE_ARGS_STRUCT_SIZE, nullptr, error, CALRT_OK};
  api->Error_GetCode(&code);
  Calrt_Error_Message_Args message{CALRT_ERROR_MESSAGE_ARGS_STRUCT_SIZE, nullptr, error, nullptr,
                                   0};
  api->Error_Message(&message);
  outcome.code = code.code;
  outcome.message.assign(message.message != nullptr ? message.message : "", message.message_size);
  Calrt_Error_Destroy_Args destroy{CALRT_ERROR_DESTROY_ARGS_STRUCT_SIZE, nullptr, error};
  api->Error_Destroy(&destroy);
  return outcome;
}

class ShimSkeleton : public ::testing::Test {
 protected:
  void SetUp() override {
    api_ = skeleton_table(CALRT_ABI_MAJOR);
    ASSERT_NE(api_, nullptr);
  }
  const CalrtApi* api_ = nullptr;
};

TEST_F(ShimSkeleton, LoaderAcceptsTheLibraryAndItsTable) {
  const calrt::Api api = calrt::load_runtime(CALRT_SHIM_SKELETON_SO);
  ASSERT_TRUE(api);
  EXPECT_EQ(api.table()->abi_major, static_cast<uint32_t>(CALRT_ABI_MAJOR));
  EXPECT_EQ(api.table()->abi_minor, static_cast<uint32_t>(CALRT_ABI_MINOR));
  EXPECT_EQ(api.table()->struct_size, CALRT_API_STRUCT_SIZE);
  // A hardware shim offers no extensions; the runner must cope with that.
  EXPECT_EQ(api.table()->extension, nullptr);
}

TEST_F(ShimSkeleton, EveryTableEntryIsPresent) {
  const size_t first = offsetof(CalrtApi, Error_Destroy);
  ASSERT_EQ((CALRT_API_STRUCT_SIZE - first) % sizeof(void (*)()), 0u);
  size_t entries = 0;
  for (size_t offset = first; offset < CALRT_API_STRUCT_SIZE; offset += sizeof(void (*)())) {
    void (*entry)() = nullptr;
    std::memcpy(&entry, reinterpret_cast<const char*>(api_) + offset, sizeof(entry));
    EXPECT_NE(entry, nullptr) << "table entry at byte offset " << offset << " is NULL";
    ++entries;
  }
  EXPECT_EQ(entries, 33u);  // Error_Destroy .. Kv_Capacity in calrt.h 0.7
}

TEST_F(ShimSkeleton, UnknownMajorGivesNull) {
  EXPECT_EQ(skeleton_table(CALRT_ABI_MAJOR + 1), nullptr);
  EXPECT_EQ(skeleton_table(UINT32_MAX), nullptr);
}

TEST_F(ShimSkeleton, DeviceCreateIsUnimplementedNamingTheSdkCall) {
  Calrt_Device_Create_Args args{};
  args.struct_size = CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE;
  args.kind = CALRT_DEVICE_PCIE;
  args.device = reinterpret_cast<CalrtDevice*>(uintptr_t{0x1234});  // must be cleared
  const Outcome outcome = call(api_, api_->Device_Create, &args);
  EXPECT_EQ(outcome.code, CALRT_UNIMPLEMENTED) << outcome.message;
  EXPECT_NE(outcome.message.find("Device_Create"), std::string::npos) << outcome.message;
  EXPECT_NE(outcome.message.find("CreateVDevice"), std::string::npos) << outcome.message;
  EXPECT_EQ(args.device, nullptr);
}

TEST_F(ShimSkeleton, DeviceCreateThroughTheWrapperThrowsTypedError) {
  const calrt::Api api = calrt::load_runtime(CALRT_SHIM_SKELETON_SO);
  try {
    calrt::Device::create(api, calrt::DeviceKind::pcie);
    FAIL() << "expected UNIMPLEMENTED";
  } catch (const calrt::Error& error) {
    EXPECT_EQ(error.code(), CALRT_UNIMPLEMENTED);
    EXPECT_EQ(error.function(), "Device_Create");
    EXPECT_NE(error.message().find("CreateVDevice"), std::string::npos) << error.message();
  }
}

TEST_F(ShimSkeleton, DeviceCreateRejectsKindsItDoesNotServe) {
  Calrt_Device_Create_Args args{};
  args.struct_size = CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE;
  args.kind = CALRT_DEVICE_SIM;
  Outcome outcome = call(api_, api_->Device_Create, &args);
  EXPECT_EQ(outcome.code, CALRT_INVALID_ARGUMENT) << outcome.message;
  // An integer no enumerator has: copied in as bytes, as a C caller could store it.
  const int32_t bogus = 77;
  std::memcpy(&args.kind, &bogus, sizeof(bogus));
  outcome = call(api_, api_->Device_Create, &args);
  EXPECT_EQ(outcome.code, CALRT_INVALID_ARGUMENT);
  EXPECT_NE(outcome.message.find("kind 77"), std::string::npos) << outcome.message;
}

TEST_F(ShimSkeleton, LargerStructFromANewerCallerIsAccepted) {
  struct Newer {
    Calrt_Device_Create_Args args;
    char appended_fields[64];
  } newer{};
  newer.args.struct_size = sizeof(Newer);
  newer.args.kind = CALRT_DEVICE_PCIE;
  const Outcome outcome = call(api_, api_->Device_Create, &newer.args);
  EXPECT_EQ(outcome.code, CALRT_UNIMPLEMENTED) << outcome.message;
}

// Every entry returning CalrtError*, with the smallest struct size it accepts (Kv_Apply's is
// its ABI 0.7 version), and whether a zeroed struct of full size must fail on a handle
// (INVALID_HANDLE) or on another argument (INVALID_ARGUMENT: a NULL string or an enum of 0).
#define CALRT_SKELETON_ENTRIES(X)                                                                \
  X(Device_Create, CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE, CALRT_INVALID_ARGUMENT)                 \
  X(Device_Destroy, CALRT_DEVICE_DESTROY_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                 \
  X(Device_Status, CALRT_DEVICE_STATUS_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                   \
  X(Device_ChipStatus, CALRT_DEVICE_CHIPSTATUS_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)           \
  X(Device_Reset, CALRT_DEVICE_RESET_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                     \
  X(Device_SetParallelMode, CALRT_DEVICE_SETPARALLELMODE_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE) \
  X(Calbin_Create, CALRT_CALBIN_CREATE_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                   \
  X(Calbin_Destroy, CALRT_CALBIN_DESTROY_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                 \
  X(Calbin_GetInfo, CALRT_CALBIN_GETINFO_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                 \
  X(Calbin_GetModel, CALRT_CALBIN_GETMODEL_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)               \
  X(Calbin_GetTensor, CALRT_CALBIN_GETTENSOR_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)             \
  X(Calbin_GetCsr, CALRT_CALBIN_GETCSR_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                   \
  X(Calbin_Configure, CALRT_CALBIN_CONFIGURE_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)             \
  X(Buffer_Create, CALRT_BUFFER_CREATE_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                   \
  X(Buffer_Destroy, CALRT_BUFFER_DESTROY_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                 \
  X(Buffer_Map, CALRT_BUFFER_MAP_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                         \
  X(Buffer_Unmap, CALRT_BUFFER_UNMAP_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                     \
  X(Buffer_SetCsr, CALRT_BUFFER_SETCSR_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                   \
  X(Buffer_GetCsr, CALRT_BUFFER_GETCSR_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                   \
  X(Job_Submit, CALRT_JOB_SUBMIT_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                         \
  X(Job_Wait, CALRT_JOB_WAIT_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                             \
  X(Job_Status, CALRT_JOB_STATUS_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                         \
  X(Job_Cancel, CALRT_JOB_CANCEL_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                         \
  X(Job_Destroy, CALRT_JOB_DESTROY_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                       \
  X(Kv_Allocate, CALRT_KV_ALLOCATE_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                       \
  X(Kv_Apply, CALRT_KV_APPLY_ARGS_STRUCT_SIZE_0_7, CALRT_INVALID_HANDLE)                         \
  X(Kv_Free, CALRT_KV_FREE_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                               \
  X(Kv_Clear, CALRT_KV_CLEAR_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                             \
  X(Kv_Info, CALRT_KV_INFO_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)                               \
  X(Kv_Capacity, CALRT_KV_CAPACITY_ARGS_STRUCT_SIZE, CALRT_INVALID_HANDLE)

TEST_F(ShimSkeleton, NullArgsAreInvalidArgument){
#define CALRT_CHECK_NULL(entry, size, zeroed)                                                     \
  {                                                                                               \
    const Outcome outcome = call(api_, api_->entry, static_cast<Calrt_##entry##_Args*>(nullptr)); \
    EXPECT_EQ(outcome.code, CALRT_INVALID_ARGUMENT) << #entry << ": " << outcome.message;         \
    EXPECT_NE(outcome.message.find("Calrt_" #entry "_Args"), std::string::npos)                   \
        << outcome.message;                                                                       \
  }
    CALRT_SKELETON_ENTRIES(CALRT_CHECK_NULL)
#undef CALRT_CHECK_NULL
}

TEST_F(ShimSkeleton, TooSmallStructIsStructTooSmall){
#define CALRT_CHECK_SMALL(entry, size, zeroed)                                                   \
  {                                                                                              \
    Calrt_##entry##_Args args{};                                                                 \
    args.struct_size = (size)-1;                                                                 \
    const Outcome outcome = call(api_, api_->entry, &args);                                      \
    EXPECT_EQ(outcome.code, CALRT_STRUCT_TOO_SMALL) << #entry << ": " << outcome.message;        \
    EXPECT_NE(outcome.message.find(std::to_string(size)), std::string::npos) << outcome.message; \
    args.struct_size = 0; /* a caller that forgot to set it */                                   \
    EXPECT_EQ(call(api_, api_->entry, &args).code, CALRT_STRUCT_TOO_SMALL) << #entry;            \
  }
    CALRT_SKELETON_ENTRIES(CALRT_CHECK_SMALL)
#undef CALRT_CHECK_SMALL
}

TEST_F(ShimSkeleton, NullAndForgedHandlesAreRejectedWithoutACrash) {
  // NULL, a small integer, an odd value, all bits set and a real host pointer: none was
  // issued, and none may be dereferenced.
  int local = 0;
  const uintptr_t forged[] = {0,         1,           0x5,
                              0x1000001, UINTPTR_MAX, reinterpret_cast<uintptr_t>(&local)};
#define CALRT_CHECK_ZEROED(entry, size, zeroed)                           \
  {                                                                       \
    Calrt_##entry##_Args args{};                                          \
    args.struct_size = size;                                              \
    const Outcome outcome = call(api_, api_->entry, &args);               \
    EXPECT_EQ(outcome.code, zeroed) << #entry << ": " << outcome.message; \
  }
  CALRT_SKELETON_ENTRIES(CALRT_CHECK_ZEROED)
#undef CALRT_CHECK_ZEROED
  for (const uintptr_t value : forged) {
    Calrt_Device_Status_Args status{};
    status.struct_size = CALRT_DEVICE_STATUS_ARGS_STRUCT_SIZE;
    status.device = reinterpret_cast<CalrtDevice*>(value);
    Outcome outcome = call(api_, api_->Device_Status, &status);
    EXPECT_EQ(outcome.code, CALRT_INVALID_HANDLE) << outcome.message;
    EXPECT_NE(outcome.message.find("CalrtDevice"), std::string::npos) << outcome.message;

    Calrt_Job_Wait_Args wait{};
    wait.struct_size = CALRT_JOB_WAIT_ARGS_STRUCT_SIZE;
    wait.job = reinterpret_cast<CalrtJob*>(value);
    wait.timeout_ns = CALRT_TIMEOUT_INFINITE;
    outcome = call(api_, api_->Job_Wait, &wait);
    EXPECT_EQ(outcome.code, CALRT_INVALID_HANDLE) << outcome.message;

    Calrt_Kv_Free_Args kv_free{};
    kv_free.struct_size = CALRT_KV_FREE_ARGS_STRUCT_SIZE;
    kv_free.kv = reinterpret_cast<CalrtKv*>(value);
    EXPECT_EQ(call(api_, api_->Kv_Free, &kv_free).code, CALRT_INVALID_HANDLE);
  }
}

TEST_F(ShimSkeleton, ErrorEntriesIgnoreNullAndForgedErrors) {
  api_->Error_Destroy(nullptr);
  api_->Error_Message(nullptr);
  api_->Error_GetCode(nullptr);
  int not_an_error = 0;
  auto* forged = reinterpret_cast<CalrtError*>(&not_an_error);
  Calrt_Error_Destroy_Args destroy{CALRT_ERROR_DESTROY_ARGS_STRUCT_SIZE, nullptr, forged};
  api_->Error_Destroy(&destroy);
  destroy.error = nullptr;
  api_->Error_Destroy(&destroy);
  Calrt_Error_Message_Args message{CALRT_ERROR_MESSAGE_ARGS_STRUCT_SIZE, nullptr, forged, nullptr,
                                   0};
  api_->Error_Message(&message);
  ASSERT_NE(message.message, nullptr);
  EXPECT_EQ(std::string(message.message, message.message_size), "(not a live CalrtError)");
  EXPECT_EQ(not_an_error, 0);

  // A real error destroyed twice: the second time is ignored, not a double free.
  Calrt_Device_Status_Args status{};
  status.struct_size = CALRT_DEVICE_STATUS_ARGS_STRUCT_SIZE;
  CalrtError* error = api_->Device_Status(&status);
  ASSERT_NE(error, nullptr);
  destroy.error = error;
  api_->Error_Destroy(&destroy);
  api_->Error_Destroy(&destroy);
}

// ---------------------------------------------------------------------------------------
// The guide's commands.
// ---------------------------------------------------------------------------------------
struct GuideCommand {
  std::string subcommand;
  std::vector<std::string> options;
  std::string line;
};

// Every `calrt SUB ...` line inside a fenced code block. `calrt` must be the whole command
// word (a path ending in /calrt counts), so libcalrt_vendor.so or calrt.h never match.
std::vector<GuideCommand> guide_commands(const std::string& markdown) {
  std::vector<GuideCommand> commands;
  std::istringstream lines(markdown);
  std::string line;
  bool in_block = false;
  while (std::getline(lines, line)) {
    if (line.rfind("```", 0) == 0) {
      in_block = !in_block;
      continue;
    }
    if (!in_block) {
      continue;
    }
    std::istringstream words(line);
    std::vector<std::string> tokens;
    for (std::string word; words >> word;) {
      tokens.push_back(word);
    }
    for (size_t i = 0; i < tokens.size(); ++i) {
      const std::string& word = tokens[i];
      const bool is_calrt =
          word == "calrt" || (word.size() > 6 && word.compare(word.size() - 6, 6, "/calrt") == 0);
      if (!is_calrt) {
        continue;
      }
      GuideCommand command;
      command.line = line;
      size_t j = i + 1;
      while (j < tokens.size() && tokens[j].rfind("-", 0) == 0) {
        ++j;  // global options such as -v come before the subcommand
      }
      if (j < tokens.size()) {
        command.subcommand = tokens[j];
      }
      for (++j; j < tokens.size() && tokens[j] != "#"; ++j) {
        if (tokens[j] == "|" || tokens[j] == "&&" || tokens[j] == ";") {
          break;
        }
        if (tokens[j].rfind("--", 0) == 0) {
          command.options.push_back(tokens[j].substr(0, tokens[j].find('=')));
        }
      }
      commands.push_back(command);
      break;
    }
  }
  return commands;
}

// Runs a command and returns its output and exit status.
std::pair<int, std::string> run(const std::string& command) {
  std::string output;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) {
    return {-1, "popen failed"};
  }
  char chunk[4096];
  size_t got = 0;
  while ((got = std::fread(chunk, 1, sizeof(chunk), pipe)) > 0) {
    output.append(chunk, got);
  }
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

bool mentions_word(const std::string& text, const std::string& word) {
  // Escaped, then bounded so that --device does not match --device-kind.
  const std::string escaped =
      std::regex_replace(word, std::regex(R"([.^$|()\[\]{}*+?\\])"), R"(\$&)");
  return std::regex_search(text, std::regex("(^|[^A-Za-z0-9_-])" + escaped + "($|[^A-Za-z0-9_-])"));
}

// Subcommands the guide may name before they exist in the runner (being written now).
bool may_be_missing(const std::string& subcommand) { return subcommand == "conformance"; }

// One problem per command word or option that the runner does not have.
std::vector<std::string> check_guide(const std::string& markdown, const std::string& calrt,
                                     size_t* checked) {
  std::vector<std::string> problems;
  const std::pair<int, std::string> top = run("'" + calrt + "' --help");
  const std::string& top_help = top.second;
  if (top.first != 0) {
    return {"calrt --help exited " + std::to_string(top.first) + ": " + top_help};
  }
  // CLI11 lists subcommands one per line, indented, name first.
  const auto listed = [&](const std::string& name) {
    return std::regex_search(top_help, std::regex("\n[ \t]+" + name + "[ \t\n]"));
  };
  *checked = 0;
  for (const GuideCommand& command : guide_commands(markdown)) {
    if (command.subcommand.empty()) {
      problems.push_back("no subcommand in: " + command.line);
      continue;
    }
    if (!listed(command.subcommand)) {
      if (!may_be_missing(command.subcommand)) {
        problems.push_back("calrt has no subcommand '" + command.subcommand +
                           "', used in: " + command.line);
      }
      continue;
    }
    const auto [status, help] = run("'" + calrt + "' " + command.subcommand + " --help");
    if (status != 0) {
      problems.push_back("calrt " + command.subcommand + " --help exited " +
                         std::to_string(status));
      continue;
    }
    for (const std::string& option : command.options) {
      if (!mentions_word(help, option)) {
        problems.push_back("calrt " + command.subcommand + " has no option " + option +
                           ", used in: " + command.line);
      }
    }
    ++*checked;
  }
  return problems;
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(VendorShimGuide, ExtractsCommandsFromCodeBlocksOnly) {
  const std::string markdown =
      "calrt prose is ignored\n```\n$ build/runner/calrt -v smoke X --device ./libcalrt_v.so "
      "--json=r.json # note --not-this\ncc -o libcalrt_vendor.so shim.cpp\n```\n";
  const std::vector<GuideCommand> commands = guide_commands(markdown);
  ASSERT_EQ(commands.size(), 1u);
  EXPECT_EQ(commands[0].subcommand, "smoke");
  EXPECT_EQ(commands[0].options, (std::vector<std::string>{"--device", "--json"}));
}

TEST(VendorShimGuide, NamesOnlyRealSubcommandsAndOptions) {
#ifdef CALRT_RUNNER_EXE
  const std::string guide = read_text(CALRT_VENDOR_SHIM_MD);
  ASSERT_FALSE(guide.empty()) << "cannot read " << CALRT_VENDOR_SHIM_MD;
  size_t checked = 0;
  const std::vector<std::string> problems = check_guide(guide, CALRT_RUNNER_EXE, &checked);
  for (const std::string& problem : problems) {
    ADD_FAILURE() << problem;
  }
  // info and smoke at least: an extractor that found nothing must not pass.
  EXPECT_GE(checked, 2u);
#else
  GTEST_SKIP() << "the calrt runner is not part of this build";
#endif
}

TEST(VendorShimGuide, CheckerReportsUnknownSubcommandsAndOptions) {
#ifdef CALRT_RUNNER_EXE
  size_t checked = 0;
  const std::vector<std::string> problems = check_guide(
      "```\ncalrt nosuchcommand --device x\ncalrt info --device x --no-such-option 1\n"
      "calrt info --device-kind pcie\n```\n",
      CALRT_RUNNER_EXE, &checked);
  ASSERT_EQ(problems.size(), 2u);
  EXPECT_NE(problems[0].find("nosuchcommand"), std::string::npos) << problems[0];
  EXPECT_NE(problems[1].find("--no-such-option"), std::string::npos) << problems[1];
  EXPECT_EQ(checked, 2u);
#else
  GTEST_SKIP() << "the calrt runner is not part of this build";
#endif
}

}  // namespace
