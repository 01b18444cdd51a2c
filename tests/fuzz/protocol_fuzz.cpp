// libFuzzer target: bytes from a socket into the daemon's frame splitter, the header check and
// every payload decoder. Each input must end in frames or a named error, within bounded
// memory, never a crash; and a payload that decodes must encode back to the same bytes (the
// wire format is canonical, so a decoder that accepted something it cannot reproduce has
// misread a field).
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "simdev/service/protocol.hpp"
#include "simdev/service/server/session/frame_splitter.hpp"

namespace svc = simdev::service;

namespace {

void check_same(const std::vector<uint8_t>& encoded, std::span<const uint8_t> payload) {
  if (encoded.size() != payload.size() ||
      !std::equal(encoded.begin(), encoded.end(), payload.begin())) {
    __builtin_trap();
  }
}

template <class M>
void control(std::span<const uint8_t> payload, const char* what) {
  auto decoded = svc::decode_payload<M>(payload, what);
  if (decoded) check_same(svc::encode_payload(*decoded), payload);
}

template <class... Calls>
void response(svc::CallList<Calls...>, uint16_t call, std::span<const uint8_t> payload) {
  (
      [&] {
        if (call != static_cast<uint16_t>(Calls::kCall)) return;
        auto decoded = svc::decode_response_payload<Calls>(payload);
        if (decoded) check_same(svc::encode_response_payload<Calls>(*decoded), payload);
      }(),
      ...);
}

void request(std::span<const uint8_t> payload) {
  auto decoded = svc::decode_request_payload(payload);
  if (!decoded) return;
  std::visit(
      [&](const auto& tagged) {
        using C = typename std::decay_t<decltype(tagged)>::CallType;
        check_same(svc::encode_request_payload<C>(tagged.in), payload);
      },
      *decoded);
  // A batch's calls are requests the daemon decodes in turn (its trailing Job_Wait first).
  if (const auto* batch = std::get_if<svc::Tagged<svc::Batch>>(&*decoded)) {
    for (const svc::HeldCall& call : batch->in.calls) request(call.request);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> bytes(data, size);
  simdev::service::server::FrameSplitter splitter;
  // Two appends at a point the input chooses: frames split across reads must come out whole.
  const size_t cut = size > 0 ? data[0] % (size + 1) : 0;
  splitter.append(bytes.first(cut));
  for (int round = 0; round < 2; ++round) {
    while (true) {
      auto frame = splitter.next();
      if (!frame || !*frame) break;
      const std::span<const uint8_t> payload((*frame)->payload);
      switch ((*frame)->header.type) {
        case svc::MessageType::hello:
          control<svc::Hello>(payload, "hello");
          break;
        case svc::MessageType::welcome:
          control<svc::Welcome>(payload, "welcome");
          break;
        case svc::MessageType::refused:
        case svc::MessageType::goodbye:
          control<svc::Notice>(payload, "notice");
          break;
        case svc::MessageType::keepalive:
          control<svc::Keepalive>(payload, "keepalive");
          break;
        case svc::MessageType::request:
          request(payload);
          break;
        case svc::MessageType::response:
          if (payload.size() >= 2) {
            response(svc::AllCalls{}, static_cast<uint16_t>(payload[0] | (payload[1] << 8)),
                     payload);
          }
          break;
      }
    }
    if (round == 0) splitter.append(bytes.subspan(cut));
  }
  // The raw bytes as one header and one request payload too, reaching the decoders without
  // needing a well-formed frame around them.
  (void)svc::decode_header(bytes);
  request(bytes);
  return 0;
}
