// Attacker: anyone who can open a connection to the API (before any authentication): the
// request head and body as src/http/server.cpp reads them, up to the handler. Beast's parser is
// driven in memory with the server's limits (64 KiB of header, a body limit, Content-Length and
// chunked bodies, 16 KiB of chunk framing pending in the read buffer), in the pieces the input
// chooses; then the target is split into path and query
// (split_target, percent_decode) as the router sees it, and a JSON body goes to parse_object.
//
// Input: one byte that picks the piece size, then the bytes on the wire.

#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "api/json_body.hpp"
#include "sandfort/http/message.hpp"
#include "sandfort/http/router.hpp"
#include "support.hpp"

namespace bhttp = boost::beast::http;
using namespace sandfort;

namespace {

constexpr std::uint32_t max_header_bytes = http::read_buffer_limit;  // src/http/server.cpp
constexpr std::size_t max_chunk_framing_bytes = 16 * 1024;           // src/http/server.cpp
constexpr std::uint64_t body_limit = 1u << 20;          // server_options::body_limit is 16 MiB; smaller
                                                       // here so that the limit itself is reached

// Feeds parser the bytes in pieces of `piece`, as async_read does with the server's read buffer:
// put() may consume less than it was given, the rest is offered again with the next piece; with
// `bound` bytes pending and more needed, the read fails (the buffer's max_size).
template <class Parser>
std::size_t feed(Parser& p, std::string_view wire, std::size_t piece, std::size_t bound, bool header_only,
                 boost::system::error_code& ec) {
  auto done = [&] { return header_only ? p.is_header_done() : p.is_done(); };
  std::size_t consumed = 0, received = 0;
  while (!done()) {
    if (received > consumed) {
      std::size_t n = p.put(boost::asio::buffer(wire.data() + consumed, received - consumed), ec);
      consumed += n;
      if (ec == bhttp::error::need_more)
        ec = {};
      else if (ec)
        break;
      if (done()) break;
      if (n > 0) continue;
    }
    if (received == wire.size()) {
      p.put_eof(ec);  // the client closed the connection
      break;
    }
    if (received - consumed >= bound) {
      ec = bhttp::error::buffer_overflow;
      break;
    }
    received = std::min({wire.size(), received + piece, consumed + bound});
  }
  return consumed;
}

// A sample of the API's route table (src/api/*.cpp), without handlers: only matching is fuzzed.
const http::router& api_routes() {
  static const http::router r = [] {
    http::router out;
    for (const char* pattern :
         {"/v1/sandboxes", "/v1/sandboxes/{id}", "/v1/sandboxes/{id}/process/exec", "/v1/sandboxes/{id}/stop",
          "/v1/sandboxes/{id}/preview/{port}", "/v1/orgs/{org}/api-keys", "/v1/volumes/{name}", "/v1/audit/verify"})
      for (auto v : {http::verb::get, http::verb::post, http::verb::patch})
        out.add(http::route{v, pattern, nullptr});
    return out;
  }();
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::size_t piece = data[0] == 0 ? size : data[0];
  std::string_view wire(reinterpret_cast<const char*>(data) + 1, size - 1);

  bhttp::request_parser<bhttp::empty_body> head;
  head.body_limit(boost::none);
  head.header_limit(max_header_bytes);
  boost::system::error_code ec;
  std::size_t used = feed(head, wire, piece, http::read_buffer_limit, true, ec);
  if (ec || !head.is_header_done()) return 0;

  std::string path;
  std::map<std::string, std::string> query;
  http::split_target(head.get().target(), path, query);
  (void)http::percent_decode(path);
  std::map<std::string, std::string> params;
  auto m = api_routes().match(head.get().method(), path, params);
  if (m.found) {
    // Captures are percent-decoded ("sbx-0%2F1" → "sbx-0/1", "%00" → NUL): handlers must treat
    // them as opaque values (today: database lookups). Each pattern's captures are all there.
    FUZZ_CHECK(params.size() == static_cast<std::size_t>(std::count(m.found->pattern.begin(),
                                                                    m.found->pattern.end(), '{')));
  } else {
    FUZZ_CHECK(m.status == 404 || m.status == 405);
  }

  bhttp::request_parser<bhttp::string_body> parser{std::move(head)};
  parser.body_limit(body_limit);
  if (auto len = parser.content_length(); len && *len > body_limit) return 0;
  feed(parser, wire.substr(used), piece, max_chunk_framing_bytes, false, ec);
  if (ec || !parser.is_done()) return 0;
  const auto& body = parser.get().body();
  FUZZ_CHECK(body.size() <= body_limit);
  if (auto len = parser.content_length()) FUZZ_CHECK(*len == body.size());
  (void)api::parse_object(body);
  return 0;
}
