#include "admission.hpp"

namespace sandfort::proxy::detail {

refusal admission::admit(const boost::asio::ip::address& source) {
  switch (pending_.take(source.to_string())) {
    case http::over_cap::none: return refusal::none;
    case http::over_cap::source: return refusal::source_full;
    case http::over_cap::total: break;
  }
  return refusal::pending_full;
}

void admission::release_pending(const boost::asio::ip::address& source) { pending_.release(source.to_string()); }

int admission::take_tunnel(const std::string& sandbox_id) {
  auto& mine = tunnels_by_sandbox_[sandbox_id];
  int status = 0;
  if (mine >= limits_.tunnels_per_sandbox)
    status = 429;
  else if (tunnels_ >= limits_.tunnels)
    status = 503;
  if (status != 0) {
    if (mine == 0) tunnels_by_sandbox_.erase(sandbox_id);
    return status;
  }
  ++mine;
  ++tunnels_;
  return 0;
}

void admission::release_tunnel(const std::string& sandbox_id) {
  --tunnels_;
  if (auto it = tunnels_by_sandbox_.find(sandbox_id); it != tunnels_by_sandbox_.end() && --it->second == 0)
    tunnels_by_sandbox_.erase(it);
}

std::optional<std::string> admission::note_refusal(const boost::asio::ip::address& source, refusal why,
                                                   time_point now) {
  ++(why == refusal::source_full ? refused_per_source_ : refused_pending_);
  auto count = refusal_log_.note(source.to_string(), now);
  if (!count) return std::nullopt;
  std::string line = "egress proxy: closed " + std::to_string(*count) + " connection(s) from " +
                     source.to_string() + " at accept: ";
  if (why == refusal::source_full)
    line += std::to_string(limits_.pending_per_source) + " unauthenticated connections from this address are open "
            "(egress.max_pending_per_source)";
  else
    line += std::to_string(limits_.pending) + " unauthenticated connections are open (egress.max_pending)";
  return line;
}

}  // namespace sandfort::proxy::detail
