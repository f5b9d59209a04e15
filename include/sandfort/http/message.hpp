#pragma once
// The HTTP types every layer above the server shares, and the helpers that build the
// JSON responses of the API contract (including its error shape).

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "sandfort/core/error.hpp"

namespace sandfort::http {

namespace bhttp = boost::beast::http;
using verb = bhttp::verb;
using request = bhttp::request<bhttp::string_body>;
using response = bhttp::response<bhttp::string_body>;

// One request as a handler sees it: the message, its id, and what routing extracted.
struct context {
  request req;
  std::string request_id;
  std::string remote;                              // the client's address ("unix" on a unix socket)
  std::string path;                                // without the query string
  std::map<std::string, std::string> query;        // decoded ?k=v pairs (last one wins)
  std::map<std::string, std::string> params;       // {name} segments of the matched route
  std::map<std::string, std::string> attributes;   // set by middleware (org, principal, ...)
};

response json_response(unsigned status, const nlohmann::json& body);
response empty_response(unsigned status);
// {"error": {"code", "message", "request_id"}} with the status that the code maps to.
response error_response(const error& e, const std::string& request_id);

// The buffer to read HTTP from a peer that may be hostile (any client, a sandbox, its agent, the
// internet). Beast bounds a message's header (header_limit) and its body (body_limit), not a
// chunk's header line with its extensions nor the trailer: those wait in the read buffer until
// they end, and Beast parses all of them again on every read (an extension's quoted string takes
// any byte, CR and LF too). The buffer's bound is theirs: a read past it fails with
// bhttp::error::buffer_overflow. Unbounded, one connection made the daemon hold all it sent and
// cost it seconds of CPU (fuzz_http_request's finding; bench/chunk_header.py). 64 KiB: the
// largest header any parser here takes, and the piece a body is relayed in.
inline constexpr std::size_t read_buffer_limit = 64 * 1024;
inline boost::beast::flat_buffer bounded_read_buffer() { return boost::beast::flat_buffer(read_buffer_limit); }

// Splits "/a/b?x=1&y=%2F" into path and decoded query.
void split_target(std::string_view target, std::string& path, std::map<std::string, std::string>& query);
std::string percent_decode(std::string_view s);

}  // namespace sandfort::http
