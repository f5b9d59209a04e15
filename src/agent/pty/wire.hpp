#pragma once
// The PTY's wire format, apart from the WebSocket itself: the query of GET /pty and the JSON
// control messages carried in text frames. Knows nothing of sockets or processes.

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "pty/terminal.hpp"
#include "sandfort/core/error.hpp"

namespace sandfort::agent::pty {

// ?cols=&rows=&command=&cwd= → what to start. cols/rows are 1..1000 (default 80x24); a
// command runs as /bin/sh -c, none means the default login shell. invalid_argument names the
// parameter at fault. Whether cwd exists is checked when the terminal starts.
result<terminal_spec> parse_query(const std::map<std::string, std::string>& query);

// Client → agent: {"type":"resize","cols":N,"rows":N}.
struct resize_request {
  window_size size;
};

// A text frame from the client: a control message, or the reason it is not one.
result<resize_request> parse_control(std::string_view text);

// Agent → client.
std::string exit_message(int exit_code);           // {"type":"exit","exit_code":N}
std::string error_message(std::string_view what);  // {"type":"error","message":"…"}

}  // namespace sandfort::agent::pty
