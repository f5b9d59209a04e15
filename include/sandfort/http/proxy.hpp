#pragma once
// Forwards a streamed request to an upstream HTTP server and relays its answer back. Bodies flow
// in pieces both ways (never whole in memory), chunked or not; server-sent events pass as they
// are produced; a WebSocket upgrade becomes a byte splice.
//
// relay() works on an upstream connection the caller opened (TCP or a unix socket), so each
// caller decides how an unreachable upstream is answered (the API: 503 in its error shape; the
// preview: a short page) and can close both connections from outside while bytes flow.
// proxy_to_unix() is sandfortd → agent on top of it.

#include <boost/asio/awaitable.hpp>
#include <boost/beast/core/basic_stream.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <string>

#include "sandfort/http/stream.hpp"

namespace sandfort::http {

struct relay_options {
  // X-Request-Id on the forwarded request and on the relayed answer: sandfortd and the agent
  // share ids. A preview leaves an application's requests and answers as they are.
  bool stamp_request_id = true;
  // When not empty, set as Sec-WebSocket-Protocol on a 101 answer (see proxy_target).
  std::string websocket_protocol;
};

struct relay_result {
  bool keep_alive = false;  // the client connection may serve another request
  // The upstream failed before its answer began (closed, reset, not HTTP). Nothing has been
  // written to the client, which the caller still owes an answer.
  bool unanswered = false;
  boost::system::error_code upstream_error;
};

// Sends the request header in ex.parser as it is (the caller rewrites it first), its body, and
// relays the answer. Expect: 100-continue is answered here. The upstream must be connected.
boost::asio::awaitable<relay_result> relay(exchange<tcp_protocol>& ex,
                                           boost::beast::basic_stream<tcp_protocol>& upstream,
                                           relay_options options);
boost::asio::awaitable<relay_result> relay(exchange<tcp_protocol>& ex,
                                           boost::beast::basic_stream<unix_protocol>& upstream,
                                           relay_options options);

struct proxy_target {
  std::string socket_path;
  std::string target;  // path and query on the upstream
  std::chrono::milliseconds connect_timeout{2'000};
  // When the caller authenticated through Sec-WebSocket-Protocol: not forwarded (it carries
  // the token), and echoed on the 101 answer as the protocol chosen.
  std::string websocket_protocol = {};
};

// Returns whether the client connection may serve another request. An upstream that cannot be
// reached, or closes before answering, is answered with 503 in the API's error shape.
boost::asio::awaitable<bool> proxy_to_unix(exchange<tcp_protocol>& ex, proxy_target target);

}  // namespace sandfort::http
