#pragma once
// One-shot HTTP(S) requests to an identity provider: a whole request and answer under one
// deadline and a size cap (an IdP is another party; it must not hang or flood the CLI).
// https:// is verified like the daemon's TLS; http:// is allowed only to loopback hosts.

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace sandfort::cli {

struct parsed_url {
  bool tls = false;
  std::string host;
  std::string port;
  std::string target;  // path and query, "/" when empty
};

// Throws failure when the URL is not http(s)://host[:port][/path], or is http:// to a host that
// is not loopback (what = what the URL is, for the message).
parsed_url parse_idp_url(const std::string& url, const std::string& what);

struct web_answer {
  unsigned status = 0;
  std::string content_type;
  std::string body;
};

struct web_request {
  std::string method = "GET";
  std::string url;
  std::string body;
  std::string content_type;
  std::chrono::seconds deadline{30};
  std::size_t body_limit = 1024 * 1024;
};

// Throws failure naming the URL when it cannot connect, times out or the answer is too large.
web_answer web_fetch(const web_request& req, const std::string& what);

// application/x-www-form-urlencoded.
std::string form_encode(const std::vector<std::pair<std::string, std::string>>& fields);

}  // namespace sandfort::cli
