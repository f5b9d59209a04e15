#pragma once
// A small HTTP/1.1 client over a unix socket (the Docker engine, the in-sandbox agent).
// Every call has a deadline; a peer that is absent or silent is an `unavailable` error,
// never a hang.

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <string>

#include "sandfort/core/error.hpp"
#include "sandfort/http/message.hpp"

namespace sandfort::http {

struct client_options {
  std::chrono::milliseconds connect_timeout{2'000};
  std::chrono::milliseconds timeout{30'000};  // for the whole exchange after connecting
  std::uint64_t body_limit = 64u << 20;
};

// Sends req (Host and Content-Length are filled in) and reads the whole response.
boost::asio::awaitable<result<response>> unix_request(std::string socket_path, request req, client_options options);

// Shorthand for JSON calls: body may be null for no body.
request make_request(verb method, std::string target, const nlohmann::json* body = nullptr);

}  // namespace sandfort::http
