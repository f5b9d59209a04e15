#pragma once
// The file API of the agent (paths mirror /v1/sandboxes/{id}/files…): whole-answer routes
// (list, stat, mkdir, move, delete) and streamed ones (file and archive upload/download).

#include <vector>

#include "sandfort/http/router.hpp"
#include "sandfort/http/stream.hpp"

namespace sandfort::agent::fs {

std::vector<http::route> routes();
std::vector<http::stream_route> stream_routes();

}  // namespace sandfort::agent::fs
