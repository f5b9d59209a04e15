#pragma once
// Turns what the engine answered into our error classes, in one place.

#include <string>
#include <string_view>

#include "sandfort/core/error.hpp"

namespace sandfort::docker::detail {

// Docker's error body is {"message": "..."}; returns that message, or the raw body trimmed
// to a readable length when it is something else.
std::string engine_message(std::string_view body);

// The error for a non-success status: 400 invalid_argument, 404 not_found, 409 conflict,
// 502/503/504 unavailable, anything else internal. what says which call failed.
error status_error(unsigned status, std::string_view body, std::string_view what);

// The error for a failed exchange (no connection, no answer in time).
error transport_error(const std::string& socket_path, const error& cause);

// Scans the JSON lines of POST /images/create: the engine reports a failed pull as a line with
// "error" even with HTTP 200. Returns the engine's reason, or "" when the pull succeeded.
std::string pull_failure_reason(std::string_view stream);

// image "<ref>" could not be pulled: <reason>; not_found when the reason says the image or
// repository does not exist (or cannot be seen), unavailable otherwise.
error pull_error(std::string_view ref, std::string_view reason);

}  // namespace sandfort::docker::detail
