#pragma once
// POST /process/exec with `Accept: text/event-stream`: the command's output as server-sent
// events while it runs, then `exit`. Without that header the plain route answers whole.

#include <vector>

#include "sandfort/http/stream.hpp"

namespace sandfort::agent {

std::vector<http::stream_route> process_stream_routes();

}  // namespace sandfort::agent
