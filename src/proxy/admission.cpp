#include "admission.hpp"

namespace sandfort::proxy::detail {

namespace {

// Sources seen refusing are forgotten once quiet for a while, so the log's memory stays small
// however many addresses a flood comes from.
constexpr std::size_t max_remembered_sources = 4096;

}  // namespace

refusal admission::admit(const boost::asio::ip::address& source) {
  if (pending_ >= limits_.pending) return refusal::pending_full;
  auto& mine = pending_by_source_[source];
  if (mine >= limits_.pending_per_source) return refusal::source_full;
  ++mine;
  ++pending_;
  return refusal::none;
}

void admission::release_pending(const boost::asio::ip::address& source) {
  --pending_;
  if (auto it = pending_by_source_.find(source); it != pending_by_source_.end() && --it->second == 0)
    pending_by_source_.erase(it);
}

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
  if (refusal_logs_.size() >= max_remembered_sources && !refusal_logs_.contains(source))
    std::erase_if(refusal_logs_, [&](const auto& entry) { return now - entry.second.last_line >= limits_.log_period; });
  auto [it, first] = refusal_logs_.try_emplace(source, refusal_log{now, 0});
  auto& log = it->second;
  ++log.unlogged;
  if (!first && now - log.last_line < limits_.log_period) return std::nullopt;
  log.last_line = now;
  std::string line = "egress proxy: closed " + std::to_string(log.unlogged) + " connection(s) from " +
                     source.to_string() + " at accept: ";
  if (why == refusal::source_full)
    line += std::to_string(limits_.pending_per_source) + " unauthenticated connections from this address are open "
            "(egress.max_pending_per_source)";
  else
    line += std::to_string(limits_.pending) + " unauthenticated connections are open (egress.max_pending)";
  log.unlogged = 0;
  return line;
}

}  // namespace sandfort::proxy::detail
