// The protocol codec: every call's In and Out survives encode -> decode -> encode, and the
// decoders refuse malformed input with a message naming what is wrong.
#include <gtest/gtest.h>

#include <iterator>
#include <string>
#include <vector>

#include "simdev/service/protocol.hpp"
#include "simdev/service/server/session/frame_splitter.hpp"

namespace svc = simdev::service;
using svc::Bytes;

namespace {

// Sets every field to a distinct non-default value (flags to 0/1, some optionals absent), so
// that a field the codec dropped or swapped shows up as a byte difference.
struct Filler {
  uint64_t n = 1;
  void operator()(const char*, uint8_t& v) { v = static_cast<uint8_t>(n++ & 1); }
  void operator()(const char*, uint16_t& v) { v = static_cast<uint16_t>(n++); }
  void operator()(const char*, uint32_t& v) { v = static_cast<uint32_t>(n++ * 0x01010101u); }
  void operator()(const char*, uint64_t& v) { v = n++ * 0x0101010101010101ull; }
  void operator()(const char*, int32_t& v) { v = -static_cast<int32_t>(n++); }
  void operator()(const char*, int64_t& v) { v = -static_cast<int64_t>(n++) * 1000000007ll; }
  void operator()(const char*, svc::WireHandle& v) { v.id = n++; }
  void operator()(const char*, std::string& v) { v = "field-" + std::to_string(n++); }
  void operator()(const char* name, std::optional<std::string>& v) {
    if (n++ % 3 == 0) {
      v.reset();
    } else {
      v.emplace();
      (*this)(name, *v);
    }
  }
  void operator()(const char*, Bytes& v) {
    const uint64_t k = n++;
    v.assign(k % 17, static_cast<uint8_t>(k));
  }
  template <class T, size_t N>
  void operator()(const char* name, std::array<T, N>& v) {
    for (T& e : v) (*this)(name, e);
  }
  template <class T>
  void operator()(const char*, std::vector<T>& v) requires(!std::is_same_v<T, uint8_t>) {
    v.resize(3);
    for (T& e : v) e.visit(*this);
  }
};

template <class C>
void round_trip_in(uint64_t seed) {
  typename C::In in{};
  Filler filler{seed};
  in.visit(filler);
  const auto payload = svc::encode_request_payload<C>(in);
  auto decoded = svc::decode_request_payload(payload);
  ASSERT_TRUE(decoded) << svc::to_string(C::kCall) << ": " << decoded.error();
  const auto* tagged = std::get_if<svc::Tagged<C>>(&*decoded);
  ASSERT_NE(tagged, nullptr) << svc::to_string(C::kCall) << " decoded as another call";
  EXPECT_EQ(svc::encode_request_payload<C>(tagged->in), payload) << svc::to_string(C::kCall);
  // Every strict prefix is refused: no field is optional on the wire.
  for (size_t cut = 0; cut < payload.size(); ++cut) {
    auto truncated = svc::decode_request_payload(std::span(payload).first(cut));
    EXPECT_FALSE(truncated) << svc::to_string(C::kCall) << " accepted a prefix of " << cut;
  }
}

template <class C>
void round_trip_out(uint64_t seed) {
  svc::Response<C> response;
  Filler filler{seed};
  response.out.visit(filler);
  response.code = CALRT_NOT_FOUND;
  response.message = "model 'x' not found";
  const auto payload = svc::encode_response_payload<C>(response);
  auto decoded = svc::decode_response_payload<C>(payload);
  ASSERT_TRUE(decoded) << svc::to_string(C::kCall) << ": " << decoded.error();
  EXPECT_EQ(decoded->code, response.code);
  EXPECT_EQ(decoded->message, response.message);
  EXPECT_EQ(svc::encode_response_payload<C>(*decoded), payload) << svc::to_string(C::kCall);
  auto extra = payload;
  extra.push_back(0);
  EXPECT_FALSE(svc::decode_response_payload<C>(extra)) << svc::to_string(C::kCall);
}

template <class... Calls>
void round_trip_all(svc::CallList<Calls...>, uint64_t seed) {
  (round_trip_in<Calls>(seed), ...);
  (round_trip_out<Calls>(seed), ...);
}

template <class... Calls>
size_t count_calls(svc::CallList<Calls...>) {
  return sizeof...(Calls);
}

std::vector<uint8_t> header_bytes(uint32_t length, uint16_t type, uint16_t flags, uint32_t id) {
  std::vector<uint8_t> out;
  svc::Writer w(out);
  w.u32(length);
  w.u16(type);
  w.u16(flags);
  w.u32(id);
  return out;
}

}  // namespace

TEST(ProtocolCodec, EveryCallRoundTripsInAndOut) {
  EXPECT_EQ(count_calls(svc::AllCalls{}), 39u);
  for (uint64_t seed : {1ull, 2ull, 3ull, 1000ull}) round_trip_all(svc::AllCalls{}, seed);
}

// The bytes of every call's request and response, filled as the round trips fill them, as
// FNV-1a digests: a change of any layout (a field added, dropped, reordered or retyped, a call
// renumbered) shows here, and asks for a new protocol major (PROTOCOL.md, "Connection").
struct PinnedCall {
  const char* call;
  uint64_t request;
  uint64_t response;
};
constexpr PinnedCall kPinned[] = {
    {"Device_Create", 0x43e7d191d562b5eaull, 0x65950a9a5eb16fecull},
    {"Device_Destroy", 0xfc89f1382439946eull, 0xb24382296b9d16eaull},
    {"Device_Status", 0x21da5e46b6c80667ull, 0x3dee2e367e6df825ull},
    {"Device_ChipStatus", 0x09de67b7c4486338ull, 0x8af7d7ac7e630b10ull},
    {"Device_Reset", 0x2ff152be0f38b5b9ull, 0x4f4d193f98f1bb57ull},
    {"Device_SetParallelMode", 0xdc0974997e25374aull, 0xd9d6471d4b6e45b6ull},
    {"Calbin_Create", 0x6eb3f020c8ebf4a1ull, 0x49dd390e800d17aeull},
    {"Calbin_Destroy", 0x77121f37199dc2c4ull, 0x9980bddab742a910ull},
    {"Calbin_GetInfo", 0x9c628c45ac2c34bdull, 0xeb61e81fc15334e5ull},
    {"Calbin_GetModel", 0x0134f560cc590ff6ull, 0x1b4ad72f0e9895f3ull},
    {"Calbin_GetTensor", 0xef85b021d2006841ull, 0xa9565012564fb5d8ull},
    {"Calbin_GetCsr", 0x88b7c9e4e28f67aaull, 0x6b7a065f61893d21ull},
    {"Calbin_Configure", 0x23badc07fe2e02f9ull, 0x78d3a3eae8f2b0e3ull},
    {"Buffer_Create", 0x1c3e55f117e381b8ull, 0x7b3152ebdbca5b95ull},
    {"Buffer_Destroy", 0x51c1b228870f50cbull, 0x537f96a34ed592edull},
    {"Buffer_Map", 0xb0d26ff434f16924ull, 0xcd9b974b3897effeull},
    {"Buffer_Unmap", 0x2cfc18472763194aull, 0x132a0d60baa9f647ull},
    {"Buffer_SetCsr", 0x864abedbdbc2cfb6ull, 0xbdd9a1ab7e41379aull},
    {"Buffer_GetCsr", 0xf5a032506e899d67ull, 0x0d4712fcb31da261ull},
    {"Job_Submit", 0x076dc562a3fb6a7bull, 0x97fd47da482449afull},
    {"Job_Wait", 0x99d4e056f722bf4full, 0x478856ee687b639eull},
    {"Job_Status", 0xf19a4d360f01f11aull, 0x010c5e4f02bf0cb9ull},
    {"Job_Cancel", 0x16eaba44a1906313ull, 0xd94a16645826ae95ull},
    {"Job_Destroy", 0x01642f6f4e9fe754ull, 0xa5169d5cc9e65d00ull},
    {"Kv_Allocate", 0x2f8ccb6816ef6d9dull, 0x2638f4b20d5b4964ull},
    {"Kv_Apply", 0x63a015581dbf77faull, 0x43a4216c87925342ull},
    {"Kv_Free", 0x7155769b064b3d3full, 0x3782d13181a84e71ull},
    {"Kv_Clear", 0x6c227b3504661f70ull, 0xccaa4250a9b9086cull},
    {"Kv_Info", 0x9172e84396f49169ull, 0xe2479445cf76530full},
    {"Kv_Capacity", 0xb6c3555229830362ull, 0xdf99a938ca781d6aull},
    {"Clock_Get", 0x5a93c431f2efc3f8ull, 0x80fb59d939d590d0ull},
    {"Clock_HostSpend", 0xb4477f4544fb5d11ull, 0x74abafdef7b03543ull},
    {"Trace_Enable", 0xde2d7b73295d6382ull, 0x1f5a4429bb45c396ull},
    {"Trace_Read", 0x65131821414d0a43ull, 0xb17a5d49fd114d8full},
    {"Fault_SetPlan", 0xc1ffbdb42043f07cull, 0xdf05bae7271bd9f0ull},
    {"Fault_GetHits", 0x4679682278305fbdull, 0x74f17e0c833be131ull},
    {"Diag_Report", 0x38df8fffe84fb496ull, 0xf02633149e754d26ull},
    {"Diag_StateHash", 0x24efc7b40f55f40full, 0x550a9b3597cadbf9ull},
    {"Batch", 0x33ecf1b911245ac6ull, 0xccb8165bfa821a30ull},
};

uint64_t fnv1a(const std::vector<uint8_t>& bytes) {
  uint64_t hash = 1469598103934665603ull;
  for (const uint8_t byte : bytes) {
    hash = (hash ^ byte) * 1099511628211ull;
  }
  return hash;
}

template <class C>
void expect_pinned(const PinnedCall& pinned) {
  typename C::In in{};
  Filler in_filler{7};
  in.visit(in_filler);
  svc::Response<C> response;
  Filler out_filler{11};
  response.out.visit(out_filler);
  response.code = CALRT_OUT_OF_RANGE;
  response.message = "m";
  EXPECT_STREQ(svc::to_string(C::kCall), pinned.call);
  EXPECT_EQ(fnv1a(svc::encode_request_payload<C>(in)), pinned.request) << pinned.call;
  EXPECT_EQ(fnv1a(svc::encode_response_payload<C>(response)), pinned.response) << pinned.call;
}

template <class... Calls>
void expect_all_pinned(svc::CallList<Calls...>) {
  size_t i = 0;
  (expect_pinned<Calls>(kPinned[i++]), ...);
}

TEST(ProtocolCodec, EveryPayloadKeepsItsBytes) {
  ASSERT_EQ(std::size(kPinned), count_calls(svc::AllCalls{}));
  expect_all_pinned(svc::AllCalls{});
}

TEST(ProtocolCodec, DefaultMessagesRoundTrip) {
  round_trip_all(svc::AllCalls{}, 0);
  svc::Hello hello;
  hello.client_name = "test";
  auto decoded = svc::decode_payload<svc::Hello>(svc::encode_payload(hello), "hello");
  ASSERT_TRUE(decoded) << decoded.error();
  EXPECT_EQ(decoded->magic, svc::kHelloMagic);
  EXPECT_EQ(decoded->client_name, "test");
  svc::Welcome welcome;
  welcome.session_id = 77;
  welcome.server_version = "v";
  auto w = svc::decode_payload<svc::Welcome>(svc::encode_payload(welcome), "welcome");
  ASSERT_TRUE(w) << w.error();
  EXPECT_EQ(w->session_id, 77u);
  svc::Notice notice{CALRT_BUSY, "full"};
  auto n = svc::decode_payload<svc::Notice>(svc::encode_payload(notice), "refused");
  ASSERT_TRUE(n) << n.error();
  EXPECT_EQ(n->code, static_cast<uint32_t>(CALRT_BUSY));
  EXPECT_TRUE(svc::decode_payload<svc::Keepalive>({}, "keepalive"));
}

TEST(ProtocolCodec, FrameHeaderRoundTrips) {
  const std::vector<uint8_t> payload = {1, 2, 3};
  const auto frame = svc::encode_frame(svc::MessageType::response, 42, payload);
  ASSERT_EQ(frame.size(), svc::kHeaderBytes + 3);
  auto header = svc::decode_header(frame);
  ASSERT_TRUE(header) << header.error();
  EXPECT_EQ(header->length, 11u);
  EXPECT_EQ(header->type, svc::MessageType::response);
  EXPECT_EQ(header->request_id, 42u);
  EXPECT_EQ(header->payload_bytes(), 3u);
}

TEST(ProtocolDecoder, RejectsShortHeader) {
  const auto bytes = header_bytes(8, 1, 0, 0);
  auto header = svc::decode_header(std::span(bytes).first(11));
  ASSERT_FALSE(header);
  EXPECT_NE(header.error().find("11 bytes"), std::string::npos) << header.error();
}

TEST(ProtocolDecoder, RejectsLengthOutsideBounds) {
  for (uint32_t length : {0u, 7u, 8u + svc::kMaxPayloadBytes + 1, 0xffffffffu}) {
    auto header = svc::decode_header(header_bytes(length, 6, 0, 1));
    ASSERT_FALSE(header) << length;
    EXPECT_NE(header.error().find("length " + std::to_string(length)), std::string::npos)
        << header.error();
  }
  EXPECT_TRUE(svc::decode_header(header_bytes(8, 6, 0, 1)));
  EXPECT_TRUE(svc::decode_header(header_bytes(8 + svc::kMaxPayloadBytes, 6, 0, 1)));
}

TEST(ProtocolDecoder, RejectsUnknownTypeAndFlags) {
  for (uint16_t type : std::vector<uint16_t>{0, 8, 0xffff}) {
    auto header = svc::decode_header(header_bytes(8, type, 0, 0));
    ASSERT_FALSE(header) << type;
    EXPECT_NE(header.error().find("unknown message type " + std::to_string(type)),
              std::string::npos)
        << header.error();
  }
  auto flagged = svc::decode_header(header_bytes(8, 1, 4, 0));
  ASSERT_FALSE(flagged);
  EXPECT_NE(flagged.error().find("flags 4"), std::string::npos) << flagged.error();
}

TEST(ProtocolDecoder, RejectsTrailingBytes) {
  svc::DeviceStatus::In in;
  in.device.id = 5;
  auto payload = svc::encode_request_payload<svc::DeviceStatus>(in);
  payload.push_back(0xee);
  auto decoded = svc::decode_request_payload(payload);
  ASSERT_FALSE(decoded);
  EXPECT_NE(decoded.error().find("Device_Status"), std::string::npos) << decoded.error();
  EXPECT_NE(decoded.error().find("1 trailing bytes"), std::string::npos) << decoded.error();
  auto hello = svc::encode_payload(svc::Hello{});
  hello.push_back(0);
  EXPECT_FALSE(svc::decode_payload<svc::Hello>(hello, "hello"));
}

TEST(ProtocolDecoder, RejectsOversizedString) {
  std::vector<uint8_t> payload;
  svc::Writer w(payload);
  w.u32(svc::kHelloMagic);
  w.u16(svc::kProtocolMajor);
  w.u16(svc::kProtocolMinor);
  w.u32(CALRT_ABI_MAJOR);
  w.u32(CALRT_ABI_MINOR);
  w.u32(svc::kMaxStringBytes + 1);  // client_name's length, over the limit
  auto decoded = svc::decode_payload<svc::Hello>(payload, "hello");
  ASSERT_FALSE(decoded);
  EXPECT_NE(decoded.error().find("'client_name'"), std::string::npos) << decoded.error();
  EXPECT_NE(decoded.error().find("exceeds the limit"), std::string::npos) << decoded.error();
  // A length within the limit but beyond the bytes that came.
  std::vector<uint8_t> lying;
  svc::Writer lw(lying);
  lw.u16(static_cast<uint16_t>(svc::Call::calbin_create));
  lw.u64(1);
  lw.u8(1);
  lw.u32(1000);
  auto short_string = svc::decode_request_payload(lying);
  ASSERT_FALSE(short_string);
  EXPECT_NE(short_string.error().find("'path'"), std::string::npos) << short_string.error();
}

TEST(ProtocolDecoder, RejectsBadPresenceFlag) {
  std::vector<uint8_t> payload;
  svc::Writer w(payload);
  w.u16(static_cast<uint16_t>(svc::Call::calbin_create));
  w.u64(1);  // device
  w.u8(2);   // path presence: neither 0 nor 1
  w.u64(0);
  auto decoded = svc::decode_request_payload(payload);
  ASSERT_FALSE(decoded);
  EXPECT_NE(decoded.error().find("presence flag 2"), std::string::npos) << decoded.error();
  EXPECT_NE(decoded.error().find("'path'"), std::string::npos) << decoded.error();
}

TEST(ProtocolDecoder, RejectsForgedSequenceCount) {
  std::vector<uint8_t> payload;
  svc::Writer w(payload);
  w.u16(static_cast<uint16_t>(svc::Call::trace_read));
  w.u32(0);            // code
  w.u32(0);            // message
  w.u32(0xffffffffu);  // events: a count no payload can hold
  w.u64(0);
  auto decoded = svc::decode_response_payload<svc::TraceRead>(payload);
  ASSERT_FALSE(decoded);
  EXPECT_NE(decoded.error().find("'events'"), std::string::npos) << decoded.error();
  EXPECT_NE(decoded.error().find("count 4294967295"), std::string::npos) << decoded.error();
}

TEST(ProtocolDecoder, RejectsUnknownCallAndEmptyPayload) {
  for (uint16_t call : std::vector<uint16_t>{0, 31, 99, 108, 0xffff}) {
    std::vector<uint8_t> payload;
    svc::Writer w(payload);
    w.u16(call);
    auto decoded = svc::decode_request_payload(payload);
    ASSERT_FALSE(decoded) << call;
    EXPECT_NE(decoded.error().find("unknown call " + std::to_string(call)), std::string::npos)
        << decoded.error();
  }
  auto empty = svc::decode_request_payload({});
  ASSERT_FALSE(empty);
  EXPECT_NE(empty.error().find("'call'"), std::string::npos) << empty.error();
}

TEST(ProtocolDecoder, ResponseForAnotherCallIsRefused) {
  svc::Response<svc::DeviceStatus> status;
  const auto payload = svc::encode_response_payload<svc::DeviceStatus>(status);
  auto decoded = svc::decode_response_payload<svc::DeviceCreate>(payload);
  ASSERT_FALSE(decoded);
  EXPECT_NE(decoded.error().find("Device_Create"), std::string::npos) << decoded.error();
}

TEST(FrameSplitter, SplitsFramesFedByteByByte) {
  std::vector<uint8_t> stream;
  for (uint32_t id = 1; id <= 3; ++id) {
    svc::DeviceStatus::In in;
    in.device.id = id;
    const auto frame = svc::encode_frame(svc::MessageType::request, id,
                                         svc::encode_request_payload<svc::DeviceStatus>(in));
    stream.insert(stream.end(), frame.begin(), frame.end());
  }
  simdev::service::server::FrameSplitter splitter;
  std::vector<uint32_t> ids;
  for (uint8_t byte : stream) {
    splitter.append(std::span(&byte, 1));
    while (true) {
      auto frame = splitter.next();
      ASSERT_TRUE(frame) << frame.error();
      if (!*frame) break;
      ids.push_back((*frame)->header.request_id);
      EXPECT_TRUE(svc::decode_request_payload((*frame)->payload));
    }
  }
  EXPECT_EQ(ids, (std::vector<uint32_t>{1, 2, 3}));
  EXPECT_EQ(splitter.pending_bytes(), 0u);
}

TEST(FrameSplitter, BadHeaderIsStickyAndNamed) {
  simdev::service::server::FrameSplitter splitter;
  const auto bad = header_bytes(3, 6, 0, 0);
  splitter.append(bad);
  auto first = splitter.next();
  ASSERT_FALSE(first);
  EXPECT_NE(first.error().find("length 3"), std::string::npos) << first.error();
  const auto good = svc::encode_frame(svc::MessageType::keepalive, 0, {});
  splitter.append(good);
  EXPECT_FALSE(splitter.next());
}

TEST(FrameSplitter, TruncatedFrameStaysPending) {
  simdev::service::server::FrameSplitter splitter;
  const auto frame = svc::encode_frame(svc::MessageType::request, 1, std::vector<uint8_t>(40, 1));
  splitter.append(std::span(frame).first(30));
  auto next = splitter.next();
  ASSERT_TRUE(next);
  EXPECT_FALSE(*next);
  EXPECT_EQ(splitter.pending_bytes(), 30u);
}
