#include "simdev/service/protocol.hpp"

namespace simdev::service {
namespace {

template <class List>
struct Decoder;
template <class... Calls>
struct Decoder<CallList<Calls...>> {
  // Tries each call in turn; exactly one matches the id.
  static bool decode(uint16_t id, Reader& r, Request& out) {
    return (try_one<Calls>(id, r, out) || ...);
  }
  template <class C>
  static bool try_one(uint16_t id, Reader& r, Request& out) {
    if (id != static_cast<uint16_t>(C::kCall)) return false;
    Tagged<C> tagged;
    tagged.in.visit(r);
    out = std::move(tagged);
    return true;
  }
};

}  // namespace

const char* to_string(Call call) {
  switch (call) {
#define SIMDEV_CALL_NAME_(Group, Verb, snake) \
  case Call::snake:                           \
    return #Group "_" #Verb;
    CALRT_CORE_CALLS(SIMDEV_CALL_NAME_)
    CALRT_EXT_CALLS(SIMDEV_CALL_NAME_)
#undef SIMDEV_CALL_NAME_
    case Call::batch:
      return "Batch";
  }
  return "unknown call";
}

tl::expected<FrameHeader, std::string> decode_header(std::span<const uint8_t> bytes) {
  if (bytes.size() < kHeaderBytes) {
    return tl::unexpected("frame header: " + std::to_string(bytes.size()) + " bytes, needs " +
                          std::to_string(kHeaderBytes));
  }
  Reader r(bytes.first(kHeaderBytes));
  FrameHeader h;
  h.length = r.u32("length");
  const uint16_t type = r.u16("type");
  h.flags = r.u16("flags");
  h.request_id = r.u32("request_id");
  if (h.length < 8 || h.length - 8 > kMaxPayloadBytes) {
    return tl::unexpected("frame header: length " + std::to_string(h.length) + " outside [8, " +
                          std::to_string(8 + uint64_t{kMaxPayloadBytes}) + "]");
  }
  if (type < static_cast<uint16_t>(MessageType::hello) ||
      type > static_cast<uint16_t>(MessageType::response)) {
    return tl::unexpected("frame header: unknown message type " + std::to_string(type));
  }
  if (h.flags != 0) {
    return tl::unexpected("frame header: flags " + std::to_string(h.flags) +
                          " (reserved, must be 0)");
  }
  h.type = static_cast<MessageType>(type);
  return h;
}

std::vector<uint8_t> encode_frame(MessageType type, uint32_t request_id,
                                  std::span<const uint8_t> payload) {
  std::vector<uint8_t> out;
  out.reserve(kHeaderBytes + payload.size());
  Writer w(out);
  w.u32(static_cast<uint32_t>(8 + payload.size()));
  w.u16(static_cast<uint16_t>(type));
  w.u16(0);
  w.u32(request_id);
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

tl::expected<Request, std::string> decode_request_payload(std::span<const uint8_t> payload) {
  Reader r(payload);
  const uint16_t id = r.u16("call");
  if (!r.ok()) return tl::unexpected("request: " + r.error());
  Request request;
  if (!Decoder<AllCalls>::decode(id, r, request)) {
    return tl::unexpected("request: unknown call " + std::to_string(id));
  }
  const char* name = to_string(static_cast<Call>(id));
  r.expect_end(name);
  if (!r.ok()) return tl::unexpected(std::string(name) + " request: " + r.error());
  return request;
}

}  // namespace simdev::service
