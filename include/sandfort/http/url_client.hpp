#pragma once
// A small HTTP(S) client for fetching documents by URL (an OpenID provider's discovery document
// and JWKS) and posting a form to one (its token endpoint): one request per connection, a deadline
// over the whole exchange, a verified TLS peer. The daemon's own unix-socket peers use client.hpp
// instead.

#include <boost/asio/awaitable.hpp>
#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sandfort/core/error.hpp"
#include "sandfort/http/message.hpp"

namespace sandfort::http {

struct url_fetch_options {
  std::chrono::milliseconds timeout{5'000};  // whole exchange incl. resolve+connect+TLS
  std::uint64_t body_limit = 1u << 20;
  std::string ca_file;                       // empty: the system's trust store
  bool allow_plain_http = false;             // http:// only when true (callers allow it for loopback hosts)
  // When set, it is shown every address the host resolves to (an IP literal is its own) before
  // any is dialed: a reason for one refuses the request (permission_denied, naming the host, the
  // address and the reason), and only the addresses it was shown are dialed — never a second
  // lookup, so a name cannot resolve to a checked address first and another one then.
  std::function<std::optional<std::string>(const boost::asio::ip::address&)> refuse_address;
  // A response body beyond body_limit is cut there (the connection closed) instead of failing the
  // request: for callers that need the status only.
  bool truncate_body = false;
};

struct url_parts {
  std::string scheme;         // "http" or "https", lower case
  std::string host;           // lower case; an IPv6 literal without its brackets
  std::uint16_t port = 0;     // the scheme's default when the URL names none
  std::string target;         // path and query ("/" at least); the fragment is dropped
};

// Splits an absolute http:// or https:// URL. invalid_argument for anything else, including
// user info ("user:pw@host"), which this client never sends.
result<url_parts> parse_url(std::string_view url);

// The Host header value for parts: "[::1]:8443", "example.com" (the port only when not the default).
std::string host_header(const url_parts& parts);

// GETs url and returns the response whatever its status (a 3xx is not followed). Errors:
// invalid_argument for a malformed or unsupported URL (http:// without allow_plain_http);
// unavailable for DNS, connect, TLS (including an unreadable ca_file), timeout, an oversized or
// malformed response. Messages name the host and the cause, never the response body.
boost::asio::awaitable<result<response>> fetch_url(std::string url, url_fetch_options options);

// POSTs form_body (application/x-www-form-urlencoded: an OAuth token request) to url, with
// `Authorization: <authorization>` when it is not empty; otherwise as fetch_url.
boost::asio::awaitable<result<response>> post_form(std::string url, std::string form_body, std::string authorization,
                                                   url_fetch_options options);

// POSTs body with `Content-Type: <content_type>` and the extra headers to url; otherwise as fetch_url.
using header_list = std::vector<std::pair<std::string, std::string>>;
boost::asio::awaitable<result<response>> post_body(std::string url, std::string content_type, std::string body,
                                                   header_list headers, url_fetch_options options);

}  // namespace sandfort::http
