// A service endpoint as the client and the runner's --device take it: unix:SOCKET or
// tcp:HOST:PORT. One parser, so that `calrt` refuses a malformed endpoint as bad input
// (exit 2) with the same words the client library would use when it connects.
#pragma once

#include <string>
#include <string_view>

#include <tl/expected.hpp>

namespace simdev::service {

struct Endpoint {
  enum class Kind { unix_socket, tcp } kind = Kind::unix_socket;
  std::string path;  // unix: the socket path (fits sockaddr_un)
  std::string host;  // tcp:
  std::string port;  // tcp: decimal, 1..65535
};

// The endpoint, or why it is malformed ("service endpoint 'tcp:x': expected tcp:HOST:PORT").
tl::expected<Endpoint, std::string> parse_endpoint(std::string_view text);

}  // namespace simdev::service
