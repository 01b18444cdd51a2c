// The client runtime against a real `simdev serve`: handle and struct_size checks made on
// the client side, device loss (a killed or a stopped daemon) while a thread waits, and
// Device_Reset reconnecting to a restarted daemon.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "daemon_process.hpp"
#include "tests/simdev/service/client/client_session.hpp"

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using calrt_test::code_of;

namespace {

class ClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = fs::temp_directory_path() /
           ("calrt_client_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    daemon_ = std::make_unique<calrt_test::DaemonProcess>(dir_);
    api_ = calrt_test::client_api(daemon_->endpoint());
  }
  void TearDown() override {
    daemon_.reset();
    fs::remove_all(dir_);
  }

  const CalrtApi* table() const { return api_.table(); }

  fs::path dir_;
  std::unique_ptr<calrt_test::DaemonProcess> daemon_;
  calrt::Api api_;
};

// A job that never completes in wall time: paced clock, the prefill hangs.
calrt::Job hung_job(calrt_test::PrefillSession& s) {
  calrt::DeviceFaults::of(s.device).set_plan(
      "seed: 1\nfaults:\n  - kind: job_hang\n    during: prefill\n    at_op: 1\n");
  return s.submit();
}

struct WaitOutcome {
  CalrtCode code = CALRT_OK;
  std::chrono::milliseconds took{0};
};

WaitOutcome wait_raw(const CalrtApi* table, CalrtJob* job, uint64_t timeout_ns) {
  Calrt_Job_Wait_Args args{};
  args.struct_size = CALRT_JOB_WAIT_ARGS_STRUCT_SIZE;
  args.job = job;
  args.timeout_ns = timeout_ns;
  const auto begin = std::chrono::steady_clock::now();
  WaitOutcome out;
  out.code = code_of(table, table->Job_Wait(&args));
  out.took = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - begin);
  return out;
}

CalrtCode status_state(const CalrtApi* table, CalrtDevice* device, CalrtDeviceState* state) {
  Calrt_Device_Status_Args args{};
  args.struct_size = CALRT_DEVICE_STATUS_ARGS_STRUCT_SIZE;
  args.device = device;
  const CalrtCode code = code_of(table, table->Device_Status(&args));
  *state = args.state;
  return code;
}

TEST_F(ClientTest, HandlesAreCheckedOnTheClient) {
  calrt_test::PrefillSession s(api_, CALRT_TEST_CALBIN);
  calrt_test::PrefillSession other(api_, CALRT_TEST_CALBIN);

  Calrt_Device_Status_Args status{};
  status.struct_size = CALRT_DEVICE_STATUS_ARGS_STRUCT_SIZE;
  for (CalrtDevice* bad :
       {static_cast<CalrtDevice*>(nullptr), reinterpret_cast<CalrtDevice*>(uintptr_t{0x1234}),
        reinterpret_cast<CalrtDevice*>(s.input.get())}) {
    status.device = bad;
    EXPECT_EQ(code_of(table(), table()->Device_Status(&status)), CALRT_INVALID_HANDLE);
  }

  // A buffer of another device in Job_Submit.
  Calrt_Job_Submit_Args submit{};
  submit.struct_size = CALRT_JOB_SUBMIT_ARGS_STRUCT_SIZE;
  submit.calbin = s.calbin.get();
  submit.model_name = s.model.c_str();
  submit.input = other.input.get();
  submit.output = s.output.get();
  EXPECT_EQ(code_of(table(), table()->Job_Submit(&submit)), CALRT_INVALID_HANDLE);
  EXPECT_EQ(submit.job, nullptr);

  // Released handles and double free.
  CalrtBuffer* released = s.output.release();
  Calrt_Buffer_Destroy_Args destroy{};
  destroy.struct_size = CALRT_BUFFER_DESTROY_ARGS_STRUCT_SIZE;
  destroy.buffer = released;
  EXPECT_EQ(code_of(table(), table()->Buffer_Destroy(&destroy)), CALRT_OK);
  EXPECT_EQ(code_of(table(), table()->Buffer_Destroy(&destroy)), CALRT_INVALID_HANDLE);
  Calrt_Buffer_Map_Args map{};
  map.struct_size = CALRT_BUFFER_MAP_ARGS_STRUCT_SIZE;
  map.buffer = released;
  EXPECT_EQ(code_of(table(), table()->Buffer_Map(&map)), CALRT_INVALID_HANDLE);

  // Children of a destroyed device.
  CalrtKv* kv = other.kv.release();
  CalrtDevice* gone = other.device.get();
  (void)other.input.release();
  (void)other.output.release();
  (void)other.calbin.release();
  (void)other.device.release();
  Calrt_Device_Destroy_Args close{};
  close.struct_size = CALRT_DEVICE_DESTROY_ARGS_STRUCT_SIZE;
  close.device = gone;
  EXPECT_EQ(code_of(table(), table()->Device_Destroy(&close)), CALRT_OK);
  EXPECT_EQ(code_of(table(), table()->Device_Destroy(&close)), CALRT_INVALID_HANDLE);
  Calrt_Kv_Info_Args info{};
  info.struct_size = CALRT_KV_INFO_ARGS_STRUCT_SIZE;
  info.kv = kv;
  EXPECT_EQ(code_of(table(), table()->Kv_Info(&info)), CALRT_INVALID_HANDLE);
}

// A device destroyed while another thread still calls it: that thread's calls answer, or fail
// with INVALID_HANDLE or DEVICE_LOST, and none crashes. (The close also waits for a send in
// progress, so that no send uses the socket's descriptor once another open may have taken
// its number; that interleaving is too narrow for this test to catch reliably.)
TEST_F(ClientTest, CallsRacingDeviceDestroyFailCleanly) {
  for (int round = 0; round < 20; ++round) {
    calrt::Device device = calrt::Device::create(api_, calrt::DeviceKind::sim, 0, "");
    CalrtDevice* raw = device.get();
    std::atomic<bool> stop{false};
    auto caller = std::async(std::launch::async, [&] {
      CalrtCode last = CALRT_OK;
      while (!stop.load() && last == CALRT_OK) {
        CalrtDeviceState state{};
        last = status_state(table(), raw, &state);
      }
      return last;
    });
    std::this_thread::sleep_for(std::chrono::microseconds(100 * round));
    Calrt_Device_Destroy_Args args{};
    args.struct_size = CALRT_DEVICE_DESTROY_ARGS_STRUCT_SIZE;
    args.device = device.release();
    EXPECT_EQ(code_of(table(), table()->Device_Destroy(&args)), CALRT_OK) << "round " << round;
    stop = true;
    ASSERT_EQ(caller.wait_for(10s), std::future_status::ready) << "round " << round;
    const CalrtCode last = caller.get();
    EXPECT_TRUE(last == CALRT_OK || last == CALRT_INVALID_HANDLE || last == CALRT_DEVICE_LOST)
        << "round " << round << ": " << last;
  }
}

TEST_F(ClientTest, StructSizeRules) {
  calrt_test::PrefillSession s(api_, CALRT_TEST_CALBIN);
  struct Larger {
    Calrt_Device_Status_Args args;
    unsigned char canary[64];
  } larger{};
  std::memset(larger.canary, 0xA5, sizeof larger.canary);
  larger.args.struct_size = sizeof larger;
  larger.args.device = s.device.get();
  EXPECT_EQ(code_of(table(), table()->Device_Status(&larger.args)), CALRT_OK);
  for (unsigned char c : larger.canary) ASSERT_EQ(c, 0xA5);

  Calrt_Device_Status_Args small{};
  small.struct_size = CALRT_DEVICE_STATUS_ARGS_STRUCT_SIZE - 1;
  small.device = s.device.get();
  EXPECT_EQ(code_of(table(), table()->Device_Status(&small)), CALRT_STRUCT_TOO_SMALL);
  EXPECT_EQ(small.runtime_version, nullptr);

  calrt::Job job = s.submit();
  ASSERT_EQ(job.wait(30s), calrt::WaitResult::ready);
  Calrt_Job_Status_Args old{};
  old.struct_size = CALRT_STRUCT_SIZE(Calrt_Job_Status_Args, end_time_ns);
  old.job = job.get();
  old.h2d_end_time_ns = 77;
  EXPECT_EQ(code_of(table(), table()->Job_Status(&old)), CALRT_OK);
  EXPECT_EQ(old.state, CALRT_JOB_COMPLETED);
  EXPECT_EQ(old.h2d_end_time_ns, 77u);  // beyond the caller's struct: untouched
}

TEST_F(ClientTest, KilledDaemonFailsABlockedWait) {
  calrt_test::PrefillSession s(api_, CALRT_TEST_CALBIN, "clock=paced");
  calrt::Job job = hung_job(s);
  auto waiter = std::async(std::launch::async,
                           [&] { return wait_raw(table(), job.get(), 30'000'000'000ull); });
  std::this_thread::sleep_for(300ms);
  daemon_->kill_now();
  ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready) << "Job_Wait hangs";
  const WaitOutcome out = waiter.get();
  EXPECT_EQ(out.code, CALRT_DEVICE_LOST);
  EXPECT_LT(out.took, 2300ms);

  // Later calls: DEVICE_LOST at once; Status answers LOST; Destroy releases.
  EXPECT_EQ(wait_raw(table(), job.get(), 0).code, CALRT_DEVICE_LOST);
  Calrt_Device_ChipStatus_Args chip{};
  chip.struct_size = CALRT_DEVICE_CHIPSTATUS_ARGS_STRUCT_SIZE;
  chip.device = s.device.get();
  EXPECT_EQ(code_of(table(), table()->Device_ChipStatus(&chip)), CALRT_DEVICE_LOST);
  CalrtDeviceState state{};
  EXPECT_EQ(status_state(table(), s.device.get(), &state), CALRT_OK);
  EXPECT_EQ(state, CALRT_DEVICE_LOST_STATE);
  job = {};
  s.kv = {};
  s.input = {};
  s.output = {};
  s.calbin = {};
  Calrt_Device_Destroy_Args close{};
  close.struct_size = CALRT_DEVICE_DESTROY_ARGS_STRUCT_SIZE;
  close.device = s.device.release();
  EXPECT_EQ(code_of(table(), table()->Device_Destroy(&close)), CALRT_OK);
}

TEST_F(ClientTest, StoppedDaemonIsLostWithinTheLivenessBound) {
  calrt_test::PrefillSession s(api_, CALRT_TEST_CALBIN, "clock=paced;service.liveness_ms=1000");
  calrt::Job job = hung_job(s);
  auto waiter = std::async(std::launch::async,
                           [&] { return wait_raw(table(), job.get(), 30'000'000'000ull); });
  std::this_thread::sleep_for(200ms);
  daemon_->stop();
  ASSERT_EQ(waiter.wait_for(6s), std::future_status::ready) << "Job_Wait hangs";
  const WaitOutcome out = waiter.get();
  EXPECT_EQ(out.code, CALRT_DEVICE_LOST);
  EXPECT_LT(out.took, 3000ms);
  EXPECT_EQ(wait_raw(table(), job.get(), 0).code, CALRT_DEVICE_LOST);
  daemon_->resume();
}

// A thread blocked in Job_Wait holds the connection's read turn; another thread's answers
// arrive while it reads and must be handed over at once, not found when the other's timed wait
// next re-checks (the liveness bound, 5 s here).
TEST_F(ClientTest, AnswersReadByAWaitingThreadAreHandedOverAtOnce) {
  calrt_test::PrefillSession s(api_, CALRT_TEST_CALBIN, "clock=paced;service.liveness_ms=5000");
  calrt::Job job = hung_job(s);
  auto waiter = std::async(std::launch::async,
                           [&] { return wait_raw(table(), job.get(), 4'000'000'000ull); });
  std::this_thread::sleep_for(200ms);  // the waiter is reading
  for (int i = 0; i < 10; ++i) {
    const auto begin = std::chrono::steady_clock::now();
    CalrtDeviceState state{};
    EXPECT_EQ(status_state(table(), s.device.get(), &state), CALRT_OK);
    EXPECT_LT(std::chrono::steady_clock::now() - begin, 1000ms) << "Device_Status " << i;
  }
  EXPECT_EQ(waiter.wait_for(0s), std::future_status::timeout) << "the wait ended early";
  job.cancel();
  ASSERT_EQ(waiter.wait_for(5s), std::future_status::ready) << "Job_Wait hangs";
  EXPECT_EQ(waiter.get().code, CALRT_OK);
}

// While nobody calls, the client's keeper reads what the daemon sends (the callers read only
// while they wait): an idle stretch longer than the liveness bound leaves the device working,
// and a goodbye sent while the client is idle is what its next call reports, not the broken
// pipe it would meet sending to a daemon that has gone.
TEST_F(ClientTest, AnIdleClientKeepsReadingTheDaemon) {
  calrt_test::PrefillSession s(api_, CALRT_TEST_CALBIN, "service.liveness_ms=1000");
  std::this_thread::sleep_for(1500ms);
  CalrtDeviceState state{};
  EXPECT_EQ(status_state(table(), s.device.get(), &state), CALRT_OK);
  EXPECT_EQ(state, CALRT_DEVICE_CONFIGURED);

  EXPECT_EQ(daemon_->terminate(), 0);   // SIGTERM: a goodbye to every session, then exit
  std::this_thread::sleep_for(1000ms);  // several keepalive periods (250 ms)
  try {
    calrt::Kv::allocate(s.calbin, 16);
    ADD_FAILURE() << "Kv_Allocate succeeded on a device whose daemon has exited";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("said goodbye"), std::string::npos) << e.what();
  }
  EXPECT_EQ(status_state(table(), s.device.get(), &state), CALRT_OK);
  EXPECT_EQ(state, CALRT_DEVICE_LOST_STATE);
}

TEST_F(ClientTest, ResetReconnectsToARestartedDaemon) {
  calrt_test::PrefillSession s(api_, CALRT_TEST_CALBIN);
  {
    calrt::Job job = s.submit();
    ASSERT_EQ(job.wait(30s), calrt::WaitResult::ready);
    EXPECT_EQ(job.status().state, calrt::JobState::completed);
  }
  CalrtBuffer* old_input = s.input.get();
  daemon_->kill_now();

  // Nobody listens: DEVICE_LOST within the connect timeout.
  Calrt_Device_Reset_Args reset{};
  reset.struct_size = CALRT_DEVICE_RESET_ARGS_STRUCT_SIZE;
  reset.device = s.device.get();
  reset.level = CALRT_RESET_FULL;
  EXPECT_EQ(code_of(table(), table()->Device_Reset(&reset)), CALRT_DEVICE_LOST);

  daemon_ = std::make_unique<calrt_test::DaemonProcess>(dir_);
  EXPECT_EQ(code_of(table(), table()->Device_Reset(&reset)), CALRT_OK);
  EXPECT_EQ(reset.state, CALRT_DEVICE_OPEN);

  // The lost session's buffers are gone; the calbin handle is the same, unconfigured.
  Calrt_Buffer_GetCsr_Args csr{};
  csr.struct_size = CALRT_BUFFER_GETCSR_ARGS_STRUCT_SIZE;
  csr.buffer = old_input;
  EXPECT_EQ(code_of(table(), table()->Buffer_GetCsr(&csr)), CALRT_INVALID_HANDLE);
  (void)s.kv.release();
  (void)s.input.release();
  (void)s.output.release();
  EXPECT_EQ(s.calbin.info().configured, 0u);
  s.calbin.configure();
  s.prepare();
  calrt::Job job = s.submit();
  ASSERT_EQ(job.wait(30s), calrt::WaitResult::ready);
  EXPECT_EQ(job.status().state, calrt::JobState::completed);
}

TEST_F(ClientTest, NoDaemonIsDeviceLost) {
  const std::string config = "service.endpoint=unix:" + (dir_ / "nobody.sock").string() +
                             ";service.connect_timeout_ms=500";
  Calrt_Device_Create_Args args{};
  args.struct_size = CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE;
  args.kind = CALRT_DEVICE_SIM;
  args.config = config.c_str();
  const auto begin = std::chrono::steady_clock::now();
  EXPECT_EQ(code_of(table(), table()->Device_Create(&args)), CALRT_DEVICE_LOST);
  EXPECT_LT(std::chrono::steady_clock::now() - begin, 2s);
  EXPECT_EQ(args.device, nullptr);

  args.config = "service.bogus=1";
  EXPECT_EQ(code_of(table(), table()->Device_Create(&args)), CALRT_INVALID_ARGUMENT);
}

// getaddrinfo would take port 107777 and connect to 107777 mod 65536 (42241).
TEST_F(ClientTest, TcpPortsOutsideTheirRangeAreInvalid) {
  for (const std::string port : {"107777", "0", "65536", "-1", "12ab"}) {
    const std::string config = "service.endpoint=tcp:127.0.0.1:" + port;
    Calrt_Device_Create_Args args{};
    args.struct_size = CALRT_DEVICE_CREATE_ARGS_STRUCT_SIZE;
    args.kind = CALRT_DEVICE_SIM;
    args.config = config.c_str();
    EXPECT_EQ(code_of(table(), table()->Device_Create(&args)), CALRT_INVALID_ARGUMENT) << port;
    EXPECT_EQ(args.device, nullptr);
  }
}

}  // namespace
