#include "sandfort/core/error.hpp"

namespace sandfort {

std::string_view to_string(errc code) noexcept {
  switch (code) {
    case errc::invalid_argument: return "invalid_argument";
    case errc::unauthenticated: return "unauthenticated";
    case errc::permission_denied: return "permission_denied";
    case errc::not_found: return "not_found";
    case errc::conflict: return "conflict";
    case errc::payload_too_large: return "payload_too_large";
    case errc::quota_exceeded: return "quota_exceeded";
    case errc::rate_limited: return "rate_limited";
    case errc::internal: return "internal";
    case errc::unavailable: return "unavailable";
    case errc::idp_unavailable: return "idp_unavailable";
    case errc::image_not_allowed: return "image_not_allowed";
    case errc::host_full: return "host_full";
    case errc::insufficient_storage: return "insufficient_storage";
    case errc::runtime_not_allowed: return "runtime_not_allowed";
  }
  return "internal";
}

int http_status(errc code) noexcept {
  switch (code) {
    case errc::invalid_argument: return 400;
    case errc::unauthenticated: return 401;
    case errc::permission_denied: return 403;
    case errc::not_found: return 404;
    case errc::conflict: return 409;
    case errc::payload_too_large: return 413;
    case errc::quota_exceeded: return 429;
    case errc::rate_limited: return 429;
    case errc::internal: return 500;
    case errc::unavailable: return 503;
    case errc::idp_unavailable: return 503;
    case errc::image_not_allowed: return 403;
    case errc::host_full: return 503;
    case errc::insufficient_storage: return 507;
    case errc::runtime_not_allowed: return 403;
  }
  return 500;
}

}  // namespace sandfort
