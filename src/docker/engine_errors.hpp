#pragma once
// Turns what the engine answered into our error classes, in one place.
//
// What the engine says is never passed on to API callers: a pull's error text carries whatever
// the registry answered (a hostile or merely local registry's body), and other answers carry
// host paths and engine internals. Callers get what failed and a short reason class; the
// engine's words go to sandfortd's log.

#include <string>
#include <string_view>

#include "sandfort/core/error.hpp"

namespace sandfort::docker::detail {

// Docker's error body is {"message": "..."}; returns that message, or the raw body trimmed
// to a readable length when it is something else. For the log, not for callers.
std::string engine_message(std::string_view body);

// The error for a non-success status: 400 invalid_argument, 404 not_found, 409 conflict,
// 502/503/504 unavailable, anything else internal. The message is "<what>: Docker answered
// HTTP <status> (<class>)"; Docker's own message is logged.
error status_error(unsigned status, std::string_view body, std::string_view what);

// The error for a failed exchange (no connection, no answer in time).
error transport_error(const std::string& socket_path, const error& cause);

// Scans the JSON lines of POST /images/create: the engine reports a failed pull as a line with
// "error" even with HTTP 200. Returns the engine's reason, or "" when the pull succeeded.
std::string pull_failure_reason(std::string_view stream);

// Why a pull failed, in classes a caller can act on.
enum class pull_failure {
  not_found,             // no such repository or tag (Docker Hub also says so for private ones)
  unauthorized,          // the registry wants credentials this daemon does not have
  registry_unreachable,  // no connection, no such host, TLS failure
  timed_out,             // the registry or the engine took too long
  docker_unreachable,    // sandfortd could not talk to the engine
  invalid_reference,     // the engine refused the reference itself
  registry_error,        // anything else the registry or the engine answered
};

// "not found", "unauthorized", "registry unreachable", ...
std::string_view to_string(pull_failure f) noexcept;
// The class of the engine's (or the transport's) reason text.
pull_failure classify_pull_failure(std::string_view reason);

// image "<ref>" could not be pulled: <class> — not_found, permission_denied (unauthorized),
// invalid_argument or unavailable. The reason itself is logged, never returned.
error pull_error(std::string_view ref, std::string_view reason);

}  // namespace sandfort::docker::detail
