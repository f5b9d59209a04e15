#pragma once
// Who may hold one of the proxy's descriptors. From accept until its credential is checked a
// connection is pending, and anyone on the bridge can open one: a sandbox that opens thousands
// and sends nothing would hold as many descriptors for the header timeout. So pending
// connections are capped per source address and in total, and one beyond a cap is closed the
// moment it is accepted (the backlog drains, nothing is held). An authenticated connection
// trades its pending slot for a tunnel slot, capped per sandbox (429) and in total (503).
// Bookkeeping only: one thread, no sockets, the time passed in. The pending counts and the
// refusal log are the HTTP listeners' too (sandfort/http/admission.hpp).

#include <boost/asio/ip/address.hpp>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>

#include "sandfort/http/admission.hpp"

namespace sandfort::proxy::detail {

struct admission_limits {
  std::size_t pending_per_source = 32;
  std::size_t pending = 512;
  std::size_t tunnels = 4096;
  std::size_t tunnels_per_sandbox = 64;
  std::chrono::milliseconds log_period{5'000};  // at most one refusal line per source per period
};

enum class refusal { none, source_full, pending_full };

class admission {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  explicit admission(admission_limits limits)
      : limits_(limits), pending_(limits.pending_per_source, limits.pending), refusal_log_(limits.log_period) {}

  // At accept: refusal::none when a pending slot was taken (release_pending gives it back).
  refusal admit(const boost::asio::ip::address& source);
  void release_pending(const boost::asio::ip::address& source);

  // After authentication: 0 when a tunnel slot was taken (release_tunnel gives it back),
  // otherwise the status to answer: 429 for the sandbox's cap, 503 for the proxy's.
  int take_tunnel(const std::string& sandbox_id);
  void release_tunnel(const std::string& sandbox_id);

  // Counts a refusal at accept; returns the line to log, unless one for this source went out
  // less than a log period ago (its refusals are summed into the next line).
  std::optional<std::string> note_refusal(const boost::asio::ip::address& source, refusal why, time_point now);

  std::size_t pending() const { return pending_.total(); }
  std::size_t tunnels() const { return tunnels_; }
  std::uint64_t refused_per_source() const { return refused_per_source_; }
  std::uint64_t refused_pending() const { return refused_pending_; }
  const admission_limits& limits() const { return limits_; }

 private:
  admission_limits limits_;
  http::source_counts pending_;
  http::refusal_log refusal_log_;
  std::size_t tunnels_ = 0;
  std::unordered_map<std::string, std::size_t> tunnels_by_sandbox_;
  std::uint64_t refused_per_source_ = 0;
  std::uint64_t refused_pending_ = 0;
};

}  // namespace sandfort::proxy::detail
