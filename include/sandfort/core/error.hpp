#pragma once
// Errors are values: every fallible call returns result<T>. The error code is a class
// (not_found, conflict, ...) that maps to exactly one HTTP status, in http_status().

#include <string>
#include <string_view>
#include <utility>
#include <variant>

namespace sandfort {

enum class errc {
  invalid_argument,
  unauthenticated,
  permission_denied,
  not_found,
  conflict,
  payload_too_large,
  quota_exceeded,
  rate_limited,
  internal,
  unavailable,
  idp_unavailable,  // 503: the identity provider that must vouch for a token cannot be reached
  image_not_allowed,  // 403: the organization's image policy does not allow that image or snapshot
  host_full,  // 503: the host cannot give a new sandbox what it asks (memory) without over-committing
  insufficient_storage,  // 507: the daemon's own disk is full; mutations wait until space returns
  runtime_not_allowed,  // 403: the organization's runtime policy does not allow that runtime (runc, gvisor)
};

// The wire name of the code, as in the API's error shape ("not_found").
std::string_view to_string(errc code) noexcept;
// The one place that turns an error class into an HTTP status.
int http_status(errc code) noexcept;

struct error {
  errc code;
  std::string message;
  // rate_limited: whole seconds until a retry can succeed, sent as Retry-After (0: no header).
  long long retry_after_s = 0;
};

inline error make_error(errc code, std::string message) { return error{code, std::move(message)}; }
// The two most common: the input is wrong; the credential is refused.
inline error invalid_argument(std::string message) { return make_error(errc::invalid_argument, std::move(message)); }
inline error unauthenticated(std::string message) { return make_error(errc::unauthenticated, std::move(message)); }

template <typename T>
class [[nodiscard]] result {
 public:
  result(T value) : v_(std::move(value)) {}  // NOLINT: implicit by design
  result(error e) : v_(std::move(e)) {}      // NOLINT

  bool ok() const noexcept { return v_.index() == 0; }
  explicit operator bool() const noexcept { return ok(); }

  T& value() & { return std::get<0>(v_); }
  const T& value() const& { return std::get<0>(v_); }
  T&& value() && { return std::get<0>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

  const error& err() const& { return std::get<1>(v_); }
  error&& err() && { return std::get<1>(std::move(v_)); }

 private:
  std::variant<T, error> v_;
};

struct ok_t {};
template <>
class [[nodiscard]] result<void> {
 public:
  result() = default;
  result(ok_t) {}        // NOLINT
  result(error e) : e_(std::move(e)), failed_(true) {}  // NOLINT
  bool ok() const noexcept { return !failed_; }
  explicit operator bool() const noexcept { return ok(); }
  const error& err() const& { return e_; }
  error&& err() && { return std::move(e_); }

 private:
  error e_{errc::internal, {}};
  bool failed_ = false;
};

}  // namespace sandfort
