// The service protocol against the call table (abi/call_table.hpp): every ABI call the
// protocol carries is the table's call of the same name, and its messages carry the table's
// fields, in the table's order, each as the wire type of its kind. Messages written out by
// hand begin with the table's fields and add the service's own after them, except where the
// ABI returns bytes or records through the caller's memory, which the wire carries itself.
#include <gtest/gtest.h>

#include <set>
#include <string>
#include <typeinfo>
#include <vector>

#include "abi/call_table.hpp"
#include "simdev/service/protocol.hpp"

namespace svc = simdev::service;
using calrt::calls::CallInfo;
using calrt::calls::Dir;
using calrt::calls::Kind;

namespace {

// A field as a message or the table has it: name and wire type.
struct WireField {
  std::string name;
  const std::type_info* type;
  bool operator==(const WireField& other) const {
    return name == other.name && *type == *other.type;
  }
};

std::ostream& operator<<(std::ostream& os, const WireField& field) {
  return os << field.name << ":" << field.type->name();
}

struct Lister {
  std::vector<WireField> fields;
  template <class T>
  void operator()(const char* name, T&) {
    fields.push_back({name, &typeid(T)});
  }
};

template <class Message>
std::vector<WireField> message_fields() {
  Message message{};
  Lister lister;
  message.visit(lister);
  return lister.fields;
}

// The table's fields of one direction, without memory fields, as the wire types them.
template <class Args>
std::vector<WireField> table_fields(Dir dir) {
  std::vector<WireField> fields;
  calrt::calls::for_each_field<Args>([&](const auto& field) {
    using F = std::remove_cvref_t<decltype(field)>;
    if constexpr (F::kind != Kind::memory) {
      if (F::dir == dir) {
        fields.push_back(
            {field.name,
             &typeid(typename svc::WireTypeOf<F::dir, F::kind, typename F::Type>::type)});
      }
    }
  });
  return fields;
}

// Messages that carry what the ABI passes through the caller's memory in a shape of their own.
const std::set<std::string> kOwnShape = {
    "Buffer_Map out",   "Trace_Read in",     "Trace_Read out", "Fault_SetPlan in",
    "Fault_GetHits in", "Fault_GetHits out", "Diag_Report in", "Diag_Report out"};

template <class C>
void expect_table_fields(const char* half, const std::vector<WireField>& table,
                         const std::vector<WireField>& message) {
  const std::string what = std::string(svc::to_string(C::kCall)) + " " + half;
  if (kOwnShape.count(what) != 0) {
    return;
  }
  ASSERT_GE(message.size(), table.size()) << what;
  for (size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(message[i], table[i]) << what << " field " << i;
  }
}

template <class C>
void expect_agrees() {
  using Args = typename C::Args;
  EXPECT_STREQ(svc::to_string(C::kCall), CallInfo<Args>::name);
  expect_table_fields<C>("in", table_fields<Args>(Dir::in), message_fields<typename C::In>());
  expect_table_fields<C>("out", table_fields<Args>(Dir::out), message_fields<typename C::Out>());
}

template <class C>
void expect_agrees_if_abi() {
  if constexpr (requires { typename C::Args; }) {
    expect_agrees<C>();
  }
}

template <class... Calls>
size_t expect_all(svc::CallList<Calls...>) {
  (expect_agrees_if_abi<Calls>(), ...);
  return (size_t{0} + ... + (requires { typename Calls::Args; } ? 1 : 0));
}

}  // namespace

TEST(ProtocolTable, EveryAbiCallCarriesTheTablesFields) {
  size_t table_calls = 0;
#define COUNT(Group, Verb, snake) ++table_calls;
  CALRT_CORE_CALLS(COUNT)
  CALRT_EXT_CALLS(COUNT)
#undef COUNT
  EXPECT_EQ(expect_all(svc::AllCalls{}), table_calls);
}

TEST(ProtocolTable, CallNumbersFollowTheTablesOrder) {
  uint16_t core = 1;
  uint16_t ext = 100;
#define EXPECT_CORE(Group, Verb, snake) \
  EXPECT_EQ(static_cast<uint16_t>(svc::Call::snake), core++) << #Group "_" #Verb;
#define EXPECT_EXT(Group, Verb, snake) \
  EXPECT_EQ(static_cast<uint16_t>(svc::Call::snake), ext++) << #Group "_" #Verb;
  CALRT_CORE_CALLS(EXPECT_CORE)
  CALRT_EXT_CALLS(EXPECT_EXT)
#undef EXPECT_CORE
#undef EXPECT_EXT
}
