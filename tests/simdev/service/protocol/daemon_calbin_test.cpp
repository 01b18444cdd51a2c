// A real daemon with the tiny calbin: a calbin, a buffer and its mapping across the wire
// (the write-back lands in the daemon's mapping, a wrong size is refused naming the sizes),
// a batched submit answered by its wait with the job's output, and a client that vanishes
// without releasing anything leaves a fresh device behind.
#include <gtest/gtest.h>

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "daemon_process.hpp"
#include "simdev/service/protocol.hpp"

namespace svc = simdev::service;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// A minimal blocking client: one request at a time, keepalives skipped.
class Client {
 public:
  explicit Client(const fs::path& path) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      throw std::runtime_error("connect failed");
    }
    timeval tv{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    svc::Hello hello;
    hello.client_name = "calbin-test";
    send(svc::encode_frame(svc::MessageType::hello, 0, svc::encode_payload(hello)));
    if (next().header.type != svc::MessageType::welcome) throw std::runtime_error("refused");
  }
  ~Client() { ::close(fd_); }

  // `Answer`: the call that answers, when it is not the one sent (a Batch ending with a
  // Job_Wait is answered by that wait).
  template <class C, class Answer = C>
  svc::Response<Answer> call(const typename C::In& in) {
    const uint32_t id = next_id_++;
    send(svc::encode_frame(svc::MessageType::request, id, svc::encode_request_payload<C>(in)));
    auto frame = next();
    if (frame.header.type != svc::MessageType::response || frame.header.request_id != id) {
      throw std::runtime_error("unexpected frame");
    }
    auto response = svc::decode_response_payload<Answer>(frame.payload);
    if (!response) throw std::runtime_error(response.error());
    return *response;
  }

 private:
  struct Raw {
    svc::FrameHeader header;
    std::vector<uint8_t> payload;
  };
  void send(const std::vector<uint8_t>& bytes) {
    if (::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) !=
        static_cast<ssize_t>(bytes.size())) {
      throw std::runtime_error("send failed");
    }
  }
  void read_exact(std::vector<uint8_t>& out) {
    size_t got = 0;
    while (got < out.size()) {
      const ssize_t n = ::recv(fd_, out.data() + got, out.size() - got, 0);
      if (n <= 0) throw std::runtime_error("connection ended or timed out");
      got += static_cast<size_t>(n);
    }
  }
  Raw next() {
    while (true) {
      std::vector<uint8_t> header(svc::kHeaderBytes);
      read_exact(header);
      auto decoded = svc::decode_header(header);
      if (!decoded) throw std::runtime_error(decoded.error());
      Raw raw{*decoded, std::vector<uint8_t>(decoded->payload_bytes())};
      read_exact(raw.payload);
      if (raw.header.type != svc::MessageType::keepalive) return raw;
    }
  }
  int fd_ = -1;
  uint32_t next_id_ = 1;
};

uint64_t attach(Client& c) {
  svc::DeviceCreate::In in;
  in.kind = CALRT_DEVICE_SIM;
  auto r = c.call<svc::DeviceCreate>(in);
  if (r.code != 0) throw std::runtime_error(r.message);
  return r.out.device.id;
}

uint64_t dram_used(Client& c, uint64_t device) {
  svc::DeviceChipStatus::In in;
  in.device.id = device;
  auto r = c.call<svc::DeviceChipStatus>(in);
  EXPECT_EQ(r.code, 0u) << r.message;
  return r.out.dram_used_bytes;
}

}  // namespace

TEST(DaemonCalbin, MapWriteBackAndCleanupOnDisconnect) {
  const fs::path dir =
      fs::temp_directory_path() / ("svc-proto-calbin-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  calrt_test::DaemonProcess daemon(dir);
  uint64_t calbin_id = 0;
  {
    Client a(daemon.socket());
    const uint64_t device = attach(a);
    svc::CalbinCreate::In create;
    create.device.id = device;
    create.path = CALRT_TEST_CALBIN;
    auto calbin = a.call<svc::CalbinCreate>(create);
    ASSERT_EQ(calbin.code, 0u) << calbin.message;
    calbin_id = calbin.out.calbin.id;
    svc::CalbinConfigure::In configure;
    configure.calbin.id = calbin_id;
    auto configured = a.call<svc::CalbinConfigure>(configure);
    ASSERT_EQ(configured.code, 0u) << configured.message;
    EXPECT_GT(dram_used(a, device), 0u);
    svc::CalbinGetModel::In model_in;
    model_in.calbin.id = calbin_id;
    auto model = a.call<svc::CalbinGetModel>(model_in);
    ASSERT_EQ(model.code, 0u) << model.message;
    svc::CalbinGetTensor::In tensor_in;
    tensor_in.calbin.id = calbin_id;
    tensor_in.model_name = model.out.name;
    tensor_in.direction = CALRT_INPUT;
    auto tensor = a.call<svc::CalbinGetTensor>(tensor_in);
    ASSERT_EQ(tensor.code, 0u) << tensor.message;

    svc::BufferCreate::In buffer_in;
    buffer_in.calbin.id = calbin_id;
    buffer_in.model_name = model.out.name;
    buffer_in.direction = CALRT_INPUT;
    auto buffer = a.call<svc::BufferCreate>(buffer_in);
    ASSERT_EQ(buffer.code, 0u) << buffer.message;
    const uint64_t buffer_id = buffer.out.buffer.id;

    svc::BufferMap::In map_in;
    map_in.buffer.id = buffer_id;
    auto mapped = a.call<svc::BufferMap>(map_in);
    ASSERT_EQ(mapped.code, 0u) << mapped.message;
    ASSERT_EQ(mapped.out.data.size(), tensor.out.size_bytes);
    ASSERT_GT(tensor.out.size_bytes, 0u);

    svc::BufferUnmap::In unmap;
    unmap.buffer.id = buffer_id;
    unmap.write_back = 1;
    unmap.data.assign(tensor.out.size_bytes + 1, 0);
    auto wrong = a.call<svc::BufferUnmap>(unmap);
    EXPECT_EQ(wrong.code, static_cast<uint32_t>(CALRT_INVALID_ARGUMENT));
    EXPECT_NE(wrong.message.find("buffer " + std::to_string(buffer_id)), std::string::npos)
        << wrong.message;
    EXPECT_NE(wrong.message.find(std::to_string(tensor.out.size_bytes + 1)), std::string::npos)
        << wrong.message;
    unmap.data.resize(tensor.out.size_bytes);
    for (size_t i = 0; i < unmap.data.size(); ++i) unmap.data[i] = static_cast<uint8_t>(i * 7);
    auto unmapped = a.call<svc::BufferUnmap>(unmap);
    ASSERT_EQ(unmapped.code, 0u) << unmapped.message;
    auto again = a.call<svc::BufferMap>(map_in);
    ASSERT_EQ(again.code, 0u) << again.message;
    EXPECT_EQ(again.out.data, unmap.data);

    // Another session cannot use these handles.
    Client b(daemon.socket());
    attach(b);
    svc::CalbinGetInfo::In info;
    info.calbin.id = calbin_id;
    auto foreign = b.call<svc::CalbinGetInfo>(info);
    EXPECT_EQ(foreign.code, static_cast<uint32_t>(CALRT_INVALID_HANDLE));
    EXPECT_NE(foreign.message.find(std::to_string(calbin_id)), std::string::npos);
    // a and b leave without releasing anything (still mapped, still configured).
  }
  // The device is released once the daemon has cleaned both sessions up.
  bool fresh = false;
  for (int attempt = 0; attempt < 100 && !fresh; ++attempt) {
    Client c(daemon.socket());
    const uint64_t device = attach(c);
    fresh = dram_used(c, device) == 0;
    if (!fresh) std::this_thread::sleep_for(20ms);
  }
  EXPECT_TRUE(fresh);
  fs::remove_all(dir);
}

// A Batch of a submit and its Job_Wait of job 0 (PROTOCOL.md, "Held submits") is answered by
// the wait itself: the job's id, its final status, and the output tensor asked for, the same
// bytes that a Buffer_Map of the output returns afterwards.
TEST(DaemonCalbin, ABatchedSubmitIsAnsweredByItsWaitWithTheOutput) {
  const fs::path dir =
      fs::temp_directory_path() / ("svc-proto-batch-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  calrt_test::DaemonProcess daemon(dir);
  Client a(daemon.socket());
  const uint64_t device = attach(a);
  auto ok = [](const auto& response, const char* what) {
    if (response.code != 0) throw std::runtime_error(std::string(what) + ": " + response.message);
    return response.out;
  };
  svc::CalbinCreate::In create;
  create.device.id = device;
  create.path = CALRT_TEST_CALBIN;
  const uint64_t calbin = ok(a.call<svc::CalbinCreate>(create), "Calbin_Create").calbin.id;
  ok(a.call<svc::CalbinConfigure>(svc::CalbinConfigure::In{{calbin}}), "Calbin_Configure");
  svc::CalbinGetModel::In model_in;
  model_in.calbin.id = calbin;
  const svc::CalbinGetModel::Out model = ok(a.call<svc::CalbinGetModel>(model_in), "GetModel");
  ASSERT_EQ(model.type, static_cast<uint32_t>(CALRT_MODEL_PREFILL)) << model.name;
  auto buffer = [&](uint32_t direction) {
    svc::BufferCreate::In in;
    in.calbin.id = calbin;
    in.model_name = model.name;
    in.direction = direction;
    return ok(a.call<svc::BufferCreate>(in), "Buffer_Create").buffer.id;
  };
  const uint64_t input = buffer(CALRT_INPUT);
  const uint64_t output = buffer(CALRT_OUTPUT);
  svc::KvAllocate::In kv_in;
  kv_in.calbin.id = calbin;
  kv_in.capacity_tokens = 64;
  svc::KvApply::In apply;
  apply.kv = ok(a.call<svc::KvAllocate>(kv_in), "Kv_Allocate").kv;
  apply.input.id = input;
  ok(a.call<svc::KvApply>(apply), "Kv_Apply");
  svc::BufferSetCsr::In csr;  // the tiny prefill's CSR 0 is cur_seq_len, CSR 1 the past's
  csr.buffer.id = input;
  csr.value = 1;
  ok(a.call<svc::BufferSetCsr>(csr), "Buffer_SetCsr");

  svc::JobSubmit::In submit;
  submit.calbin.id = calbin;
  submit.model_name = model.name;
  submit.input.id = input;
  submit.output.id = output;
  svc::JobWait::In wait;  // job 0: the batch's submit
  wait.timeout_ns = 10'000'000'000;
  wait.output.id = output;
  wait.fetch = {svc::TensorIndex{0}};
  svc::Batch::In batch;
  batch.calls = {svc::HeldCall{svc::encode_request_payload<svc::JobSubmit>(submit)},
                 svc::HeldCall{svc::encode_request_payload<svc::JobWait>(wait)}};
  const svc::JobWait::Out waited = ok(a.call<svc::Batch, svc::JobWait>(batch), "the batch");
  EXPECT_EQ(waited.result, static_cast<uint32_t>(CALRT_WAIT_READY));
  EXPECT_EQ(waited.state, static_cast<uint32_t>(CALRT_JOB_COMPLETED));
  ASSERT_EQ(waited.status.size(), 1u);
  EXPECT_EQ(waited.status[0].state, static_cast<uint32_t>(CALRT_JOB_COMPLETED));
  ASSERT_EQ(waited.outputs.size(), 1u) << "the output did not come with the wait";
  EXPECT_EQ(waited.outputs[0].index, 0u);

  // The id names the job; the bytes are the output's.
  const svc::JobStatusOut status =
      ok(a.call<svc::JobStatus>(svc::JobStatus::In{waited.job}), "Job_Status");
  EXPECT_EQ(status.state, static_cast<uint32_t>(CALRT_JOB_COMPLETED));
  EXPECT_EQ(status.end_time_ns, waited.status[0].end_time_ns);
  svc::BufferMap::In map;
  map.buffer.id = output;
  const svc::BufferMap::Out mapped = ok(a.call<svc::BufferMap>(map), "Buffer_Map");
  EXPECT_EQ(waited.outputs[0].data, mapped.data);
  EXPECT_FALSE(mapped.data.empty());
  fs::remove_all(dir);
}

// --calbin-root: a client's Calbin_Create opens only what lies under the roots, after every
// symbolic link is followed, and a refusal outside them says nothing of what exists there.
TEST(DaemonCalbin, CalbinRootsConfineCalbinCreate) {
  const fs::path dir =
      fs::temp_directory_path() / ("svc-proto-roots-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  const fs::path root = dir / "root";
  fs::create_directories(root);
  fs::copy(CALRT_TEST_CALBIN, root / "tiny", fs::copy_options::recursive);
  fs::create_directory_symlink(CALRT_TEST_CALBIN, root / "escape");
  calrt_test::DaemonProcess daemon(dir / "daemon",
                                   calrt_test::DaemonOptions{{"--calbin-root", root.string()}});
  Client client(daemon.socket());
  const uint64_t device = attach(client);
  auto create = [&](const std::string& path) {
    svc::CalbinCreate::In in;
    in.device.id = device;
    in.path = path;
    return client.call<svc::CalbinCreate>(in);
  };
  const auto inside = create((root / "tiny").string());
  EXPECT_EQ(inside.code, 0u) << inside.message;

  struct Refused {
    std::string path;
    std::string says;
  };
  const std::string outside = "outside the daemon's calbin roots";
  for (const Refused& r :
       std::vector<Refused>{{"/etc/passwd", outside},
                            {"/nonexistent/calbin", outside},
                            {(root / ".." / "daemon").string(), outside},
                            {std::string(CALRT_TEST_CALBIN), outside},
                            {(root / "escape").string(), "once its symbolic links are followed"},
                            {"relative/calbin", "not absolute"}}) {
    const auto refused = create(r.path);
    EXPECT_EQ(refused.code, static_cast<uint32_t>(CALRT_INVALID_ARGUMENT)) << r.path;
    EXPECT_NE(refused.message.find(r.says), std::string::npos) << r.path << ": " << refused.message;
    // No oracle: nothing says whether the file exists, nor shows a byte of it.
    EXPECT_EQ(refused.message.find("No such file"), std::string::npos) << refused.message;
    EXPECT_EQ(refused.message.find("root:"), std::string::npos) << refused.message;
  }
  // Inside a root the daemon may say what is missing: the operator published that tree.
  const auto missing = create((root / "missing").string());
  EXPECT_EQ(missing.code, static_cast<uint32_t>(CALRT_INVALID_ARGUMENT)) << missing.message;
  EXPECT_NE(missing.message.find("No such file"), std::string::npos) << missing.message;
  fs::remove_all(dir);
}
