#pragma once
// The first line of every link the agent opens to sandfortd (docs/architecture.md, "The agent
// dials home"): what the link is for, nothing else. Who the agent is, the link never says: the
// door it came through decides that (door.hpp).
//
//   SANDFORT-HOME/1 agent\n    HTTP/1.1 follows, sandfortd the client, the agent the server
//   SANDFORT-HOME/1 tunnel\n   the bytes of one egress client follow (a proxy request first)

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <cstddef>
#include <string>
#include <string_view>

#include "sandfort/core/error.hpp"
#include "sandfort/http/any_stream.hpp"

namespace sandfort::home {

enum class link_kind { agent, tunnel };

inline constexpr std::size_t max_hello_bytes = 64;  // the newline included
inline constexpr std::chrono::seconds hello_timeout{5};

// "SANDFORT-HOME/1 agent\n"
std::string hello_line(link_kind kind);
// The kind a hello line (without its newline) names; invalid_argument for anything else.
result<link_kind> parse_hello(std::string_view line);

// Reads a just-accepted link's hello: its bytes up to the newline and not one byte further (what
// follows is the next layer's), at most max_hello_bytes, within `timeout`. A link that sends
// something else, more, or nothing in time is refused (invalid_argument; unavailable when late).
boost::asio::awaitable<result<link_kind>> read_hello(http::any_stream& link,
                                                     std::chrono::milliseconds timeout = hello_timeout);
boost::asio::awaitable<result<void>> write_hello(http::any_stream& link, link_kind kind);

// The bytes of `link` up to and including the first `delimiter`, and not one byte further: at
// most `max_bytes` (more is invalid_argument), within `timeout` (unavailable, as is an early end).
boost::asio::awaitable<result<std::string>> read_exactly_through(http::any_stream& link, std::string_view delimiter,
                                                                 std::size_t max_bytes,
                                                                 std::chrono::milliseconds timeout);

}  // namespace sandfort::home
