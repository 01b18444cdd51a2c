// Writes the protocol fuzzer's seed corpus: one file per message kind, each a valid frame
// (a handshake, a request of every call, a response, a goodbye), so that the fuzzer starts
// from inputs that reach every decoder.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "simdev/service/protocol.hpp"

namespace svc = simdev::service;

namespace {

void write(const std::filesystem::path& dir, const std::string& name,
           const std::vector<uint8_t>& bytes) {
  std::ofstream out(dir / name, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
}

template <class... Calls>
void requests(svc::CallList<Calls...>, const std::filesystem::path& dir) {
  uint32_t id = 1;
  (
      [&] {
        typename Calls::In in{};
        const auto frame = svc::encode_frame(svc::MessageType::request, id++,
                                             svc::encode_request_payload<Calls>(in));
        write(dir, std::string("request-") + svc::to_string(Calls::kCall), frame);
        svc::Response<Calls> response;
        response.message = "seed";
        write(dir, std::string("response-") + svc::to_string(Calls::kCall),
              svc::encode_frame(svc::MessageType::response, id,
                                svc::encode_response_payload<Calls>(response)));
      }(),
      ...);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: protocol_fuzz_seeds DIR\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  svc::Hello hello;
  hello.client_name = "seed";
  auto handshake = svc::encode_frame(svc::MessageType::hello, 0, svc::encode_payload(hello));
  svc::DeviceCreate::In create;
  create.kind = CALRT_DEVICE_SIM;
  create.config = "seed=1";
  const auto first = svc::encode_frame(svc::MessageType::request, 1,
                                       svc::encode_request_payload<svc::DeviceCreate>(create));
  handshake.insert(handshake.end(), first.begin(), first.end());
  write(dir, "hello-and-create", handshake);
  write(dir, "welcome",
        svc::encode_frame(svc::MessageType::welcome, 0, svc::encode_payload(svc::Welcome{})));
  write(dir, "goodbye",
        svc::encode_frame(svc::MessageType::goodbye, 0,
                          svc::encode_payload(svc::Notice{CALRT_DEVICE_LOST, "bye"})));
  write(dir, "keepalive", svc::encode_frame(svc::MessageType::keepalive, 0, {}));
  requests(svc::AllCalls{}, dir);
  // A decode step's one request: a held CSR write, the submit, and the wait of its job.
  svc::Batch::In step;
  step.calls.push_back({svc::encode_request_payload<svc::BufferSetCsr>({})});
  step.calls.push_back({svc::encode_request_payload<svc::JobSubmit>({})});
  step.calls.push_back({svc::encode_request_payload<svc::JobWait>({})});
  write(dir, "request-batch-submit-wait",
        svc::encode_frame(svc::MessageType::request, 2,
                          svc::encode_request_payload<svc::Batch>(step)));
  return 0;
}
