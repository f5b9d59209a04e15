#pragma once
// Forwards a streamed request to an upstream HTTP server and relays its answer back. Bodies flow
// in pieces both ways (never whole in memory), chunked or not; server-sent events pass as they
// are produced; a WebSocket upgrade becomes a byte splice.
//
// relay() works on an upstream connection the caller opened (TCP or a unix socket), so each
// caller decides how an unreachable upstream is answered (the API: 503 in its error shape; the
// preview: a short page) and can close both connections from outside while bytes flow.
// forward() is sandfortd → agent on top of it, over a connection the agent connector opened.

#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>
#include <chrono>
#include <functional>
#include <string>

#include "sandfort/http/stream.hpp"

namespace sandfort::http {

struct relay_options {
  // X-Request-Id on the forwarded request and on the relayed answer: sandfortd and the agent
  // share ids. A preview leaves an application's requests and answers as they are.
  bool stamp_request_id = true;
  // X-Content-Type-Options: nosniff on the relayed answer: an agent's file served as it is must
  // never run as a script on a page that loads it (docs/console.md). A preview's application
  // answers for itself.
  bool no_sniff = true;
  // When not empty, set as Sec-WebSocket-Protocol on a 101 answer (see forward_options).
  std::string websocket_protocol;
  // Deadlines on the upstream, for upstreams that are not trusted to answer (zero: none). The
  // answer's header must arrive within answer_timeout of the request; while a body flows, each
  // piece within idle_timeout — except an event stream or a WebSocket, which live as long as
  // the client stays.
  std::chrono::milliseconds answer_timeout{0};
  std::chrono::milliseconds idle_timeout{0};
  // Called on the upstream's answer header before it is relayed (101 included): the preview adds
  // its cookie and referrer policy to an app's answer.
  std::function<void(bhttp::fields&)> amend_answer = {};
};

struct relay_result {
  bool keep_alive = false;  // the client connection may serve another request
  // The upstream connection may carry another request: the request went out whole, the answer
  // (not an upgrade, not an event stream) was framed and read to its end with nothing after it,
  // and the upstream did not ask to close. sandfortd keeps such a connection to an agent.
  bool upstream_reusable = false;
  // The upstream failed before its answer began (closed, reset, not HTTP). Nothing has been
  // written to the client, which the caller still owes an answer.
  bool unanswered = false;
  boost::system::error_code upstream_error;
};

// Completes when the client of an answer it only reads (an event stream) has left: its socket
// turned readable with nothing to read. Cancellable; waits on until cancelled when the client
// sent bytes instead. Used with `||` beside what produces the answer.
boost::asio::awaitable<void> until_client_leaves(exchange& ex);

// Bytes both ways between two connected streams, each direction until its reader sees the end
// (then the other side's sending half is shut), until both have ended.
boost::asio::awaitable<void> splice_streams(any_stream& a, any_stream& b);

// Sends the request header in ex.parser as it is (the caller rewrites it first), its body, and
// relays the answer. Expect: 100-continue is answered here. The upstream must be connected.
boost::asio::awaitable<relay_result> relay(exchange& ex, any_stream& upstream, relay_options options);

struct forward_options {
  std::string target;  // path and query on the upstream
  // When the caller authenticated through Sec-WebSocket-Protocol: not forwarded (it carries
  // the token), and echoed on the 101 answer as the protocol chosen.
  std::string websocket_protocol = {};
  std::chrono::milliseconds answer_timeout{0};
  std::chrono::milliseconds idle_timeout{0};
};

// Forwards the request in ex to a connected upstream (the agent) without the caller's
// credentials: whether the client connection may serve another request, and whether the
// upstream one may. An upstream that closes or stalls before answering is answered with 503 in
// the API's error shape.
boost::asio::awaitable<relay_result> forward(exchange& ex, any_stream& upstream, forward_options options);

}  // namespace sandfort::http
