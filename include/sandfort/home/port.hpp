#pragma once
// A port inside the sandbox, reached over an agent link (docs/architecture.md, "The agent dials
// home"): the preview router's way to an application when the sandbox has no address.
//
//   sandfortd → agent   GET /tcp/<port> HTTP/1.1, Connection: Upgrade, Upgrade: sandfort-tcp
//   agent → sandfortd   101 Switching Protocols, then the link carries the bytes of a TCP
//                       connection the agent made to 127.0.0.1:<port>, both ways, unchanged;
//                       or an error answer (503 nothing listens, 403 the agent's own port) and
//                       the link's end.
//
// The 101's header is read and not one byte past it: what follows is the application's.

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <string>
#include <string_view>

#include "sandfort/core/error.hpp"
#include "sandfort/http/any_stream.hpp"

namespace sandfort::home {

inline constexpr std::string_view port_upgrade = "sandfort-tcp";

// "GET /tcp/8080 HTTP/1.1\r\n…\r\n\r\n"
std::string port_request(unsigned short port);
// The status of an answer header read in full ("HTTP/1.1 101 …\r\n…\r\n\r\n"); 0 when it is not one.
unsigned answer_status(std::string_view header);

// Sends the request on an idle agent link and reads the answer's header. Success: the link now
// carries the application's bytes. unavailable: nothing listens there (or the link failed);
// permission_denied: the port is the agent's own.
boost::asio::awaitable<result<void>> open_port(http::any_stream& link, unsigned short port,
                                               std::chrono::milliseconds timeout);

}  // namespace sandfort::home
