#include "simdev/service/endpoint.hpp"

#include <sys/un.h>

namespace simdev::service {

tl::expected<Endpoint, std::string> parse_endpoint(std::string_view text) {
  const std::string quoted = "service endpoint '" + std::string(text) + "'";
  Endpoint endpoint;
  if (text.rfind("unix:", 0) == 0) {
    endpoint.kind = Endpoint::Kind::unix_socket;
    endpoint.path = std::string(text.substr(5));
    constexpr size_t kMaxPath = sizeof(sockaddr_un::sun_path) - 1;
    if (endpoint.path.empty() || endpoint.path.size() > kMaxPath) {
      return tl::unexpected(quoted + ": the socket path is empty or longer than " +
                            std::to_string(kMaxPath) + " bytes");
    }
    return endpoint;
  }
  if (text.rfind("tcp:", 0) == 0) {
    endpoint.kind = Endpoint::Kind::tcp;
    const std::string_view rest = text.substr(4);
    const size_t colon = rest.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == rest.size()) {
      return tl::unexpected(quoted + ": expected tcp:HOST:PORT");
    }
    endpoint.host = std::string(rest.substr(0, colon));
    endpoint.port = std::string(rest.substr(colon + 1));
    // getaddrinfo takes 107777 and connects to 107777 mod 65536: check the range first.
    if (endpoint.port.size() > 5 ||
        endpoint.port.find_first_not_of("0123456789") != std::string::npos ||
        std::stoul(endpoint.port) < 1 || std::stoul(endpoint.port) > 65535) {
      return tl::unexpected(quoted + ": port '" + endpoint.port + "' is not a number in 1..65535");
    }
    return endpoint;
  }
  return tl::unexpected(quoted + ": expected unix:SOCKET or tcp:HOST:PORT");
}

}  // namespace simdev::service
