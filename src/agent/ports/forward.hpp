#pragma once
// GET /tcp/{port} with `Upgrade: sandfort-tcp`: the link it came on becomes a TCP connection to
// 127.0.0.1:<port> (or [::1]:<port>) inside the sandbox — how sandfortd's preview router reaches
// an application in a sandbox with no network interface (sandfort/home/port.hpp has the wire).
// Refusals are plain HTTP errors before the upgrade: 400 not a port, 403 the agent's own
// listener, 503 nothing listening.

#include <vector>

#include "sandfort/http/stream.hpp"

namespace sandfort::agent::ports {

std::vector<http::stream_route> stream_routes();

// A port the agent itself listens on (the sandbox's HTTP_PROXY): never handed out, or a preview
// visitor would get the sandbox's egress.
void keep_private(unsigned short port);

}  // namespace sandfort::agent::ports
