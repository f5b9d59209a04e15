#pragma once
// The bytes the proxy writes itself and the line it logs, as functions of their inputs.

#include <boost/beast/http/message.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "sandfort/proxy/proxy.hpp"
#include "sandfort/proxy/request.hpp"

namespace sandfort::proxy::detail {

namespace bhttp = boost::beast::http;

// A complete answer with a short text body and Connection: close; a 407 carries the
// Proxy-Authenticate challenge. `why`, when given, follows the status's standard reason phrase in
// parentheses ("403 Forbidden (host not on ...)"): tools print the status line of a refused
// CONNECT (pip, apt, npm) but not the body, so the line is where the reason can reach the user.
std::string deny_response(int status, std::string_view message, std::string_view why = {});

inline constexpr std::string_view connect_established = "HTTP/1.1 200 Connection established\r\n\r\n";

// Watches a request head arrive, before any parser sees it: finds its end (CRLF CRLF) and
// refuses what could make two readers disagree on where a line ends — a bare CR or LF, a folded
// line (obs-fold, which a parser would silently join), a control character.
class head_scanner {
 public:
  // `received` is everything read so far (it only grows). Returns the problem, if any.
  std::optional<std::string> scan(std::string_view received);
  // The head's length (its final CRLF CRLF included), once scan() has seen it.
  std::optional<std::size_t> end() const { return end_; }

 private:
  std::size_t next_ = 0;  // the first byte not yet judged
  std::optional<std::size_t> end_;
};

// False when a header value holds a control character (CR, LF, NUL, ...; HTAB is fine): such a
// value would inject lines into the request we forward.
bool header_values_clean(const bhttp::request_header<>& head);

// The head sent upstream for a forwarded request: origin-form target, Host from the URI,
// hop-by-hop headers (Proxy-Authorization among them) removed, Connection: close.
std::string forward_head(const bhttp::request_header<>& head, const egress_target& target);

// The head a forwarded response reaches the client with: the upstream's status line and headers,
// less the hop-by-hop ones (Connection and the headers it names, Keep-Alive, Proxy-Connection),
// plus Connection: close unless `keep_alive` (the response's end can be told without the
// upstream closing, and the client may send another request).
std::string response_head_for_client(const bhttp::response_header<>& head, bool keep_alive);

// The status in the first bytes of an HTTP response ("HTTP/1.1 404 ..."), or 0.
int response_status(std::string_view start);

// `egress sandbox=… org=… host=… port=… decision=… reason="…" status=… bytes_in=… bytes_out=…
// duration_ms=… address=…`. Values come from a hostile client: they are cut short and stripped
// of anything that could forge another field or line.
std::string decision_line(const egress_event& ev);

}  // namespace sandfort::proxy::detail
