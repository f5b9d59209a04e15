#pragma once
// Secret injection at the egress proxy (docs/secrets.md), as pure functions of a request head and
// the sandbox's secrets: where a placeholder is replaced by the real value on the way out, and the
// value replaced by the placeholder on the way back. The proxy calls them on requests it
// intercepted (HTTPS to a host a secret is bound to); they are tested here without sockets.
//
// The rules, for each secret bound to the request's host (and only those):
//   header      a header of the placement's name whose value holds the placeholder becomes the
//               placement's format with the value in it ("Bearer {value}");
//   query       a query parameter of the placement's name whose value is the placeholder gets the
//               value (percent-encoded);
//   basic_auth  `Authorization: Basic base64(user:placeholder)` becomes
//               `Basic base64(<the placement's username>:value)`.
// A placeholder anywhere else (another header, another parameter, the path, the body) and a
// placeholder sent to a host the secret is not bound to are left as they are.

#include <boost/beast/http/message.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sandfort/secrets/types.hpp"

namespace sandfort::proxy {

// One secret a sandbox holds, as the proxy needs it: looked up for each request, so a rotation or
// a deletion applies to the next one.
struct injected_secret {
  std::string name;
  std::string placeholder;         // what the sandbox holds in its environment
  std::vector<std::string> hosts;  // patterns: "api.example.com", "*.example.com"
  secrets::placement placement;
  std::string value;               // the real value; never logged, never sent to the sandbox
};

// Whether a request to `host` (normalized) may carry this secret.
bool bound_to(const injected_secret& secret, std::string_view host);
// Whether any of the sandbox's secrets is bound to `host`: its CONNECTs are intercepted.
bool any_bound_to(const std::vector<injected_secret>& secrets, std::string_view host);

struct upstream_request {
  std::string head;                   // the request head to send to the upstream, CRLF CRLF included
  std::vector<std::string> injected;  // the names of the secrets put in, in the order of `secrets`
};

// The head an intercepted request goes to the upstream with: the request line (origin-form
// target, HTTP/1.1), its headers less the hop-by-hop ones (Connection and those it names,
// Keep-Alive, Proxy-*, TE, Upgrade), a Host (the client's, else `host_header`), and the
// placeholders of the secrets bound to `host` replaced by their values. When any secret is bound
// to `host`, Accept-Encoding is `identity`: a response that echoes the value must come back in the
// clear for the proxy to take it out.
upstream_request intercepted_request_head(const boost::beast::http::request_header<>& head, std::string_view host,
                                          std::string_view host_header, const std::vector<injected_secret>& secrets);

// value → placeholder for each secret bound to `host`: what responses from it are cleaned of.
using replacements = std::vector<std::pair<std::string, std::string>>;
replacements response_replacements(const std::vector<injected_secret>& secrets, std::string_view host);
// `text` with every occurrence of each value replaced by its placeholder (leftmost first).
std::string replace_values(std::string_view text, const replacements& r);

// replace_values over a body that arrives in pieces: a value split across two pieces is found.
// feed() returns what can be sent now; the last len(longest value) - 1 bytes wait for the next
// piece or for finish().
class stream_rewriter {
 public:
  explicit stream_rewriter(replacements r);
  std::string feed(std::string_view piece);
  std::string finish();

 private:
  replacements r_;
  std::size_t keep_ = 0;
  std::string pending_;
};

// Percent-encoding of a query parameter's value: unreserved characters (RFC 3986) as they are.
std::string percent_encode(std::string_view s);

}  // namespace sandfort::proxy
