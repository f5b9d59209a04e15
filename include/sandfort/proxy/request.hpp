#pragma once
// Reading a proxy request: the sandbox's credential and where the request wants to go. Pure
// functions over the request line and one header value, so every hostile spelling is tested
// without a socket.

#include <optional>
#include <string>
#include <string_view>

#include "sandfort/core/error.hpp"
#include "sandfort/proxy/policy.hpp"

namespace sandfort::proxy {

struct proxy_credentials {
  std::string sandbox_id;
  std::string secret;
};

// `Proxy-Authorization: Basic base64(<sandbox-id>:<secret>)`. nullopt for any other scheme, bad
// base64 (strict: padded, standard alphabet), no ':', an empty id or secret, or a control
// character in either.
std::optional<proxy_credentials> parse_proxy_authorization(std::string_view value);

struct egress_target {
  enum class kind { tunnel, forward };
  kind mode = kind::tunnel;
  authority where;
  std::string host;           // normalized (lowercase, no trailing dot): what is checked and resolved
  std::string origin_target;  // forward only: "/path?query"
  std::string host_header;    // forward only: the Host the upstream gets, from the URI
};

// CONNECT host:port → a tunnel; an absolute-form http:// URI (port 80 by default) → a forwarded
// request. Origin-form, "*", other schemes, user info, fragments and bad ports are refused
// (invalid_argument, with a message fit for the client).
result<egress_target> parse_request_target(bool is_connect, std::string_view target);

}  // namespace sandfort::proxy
