#include "agent_idle.hpp"

#include <cerrno>
#include <sys/socket.h>

namespace sandfort::sandbox {

bool still_quiet(agent_stream& stream) {
  if (!stream.socket().is_open()) return false;
  char byte;
  const ssize_t n = ::recv(stream.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

void idle_connections::drop(kept& k, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    k.items.front().stream.close();
    k.items.pop_front();
  }
  count_ -= n;
}

void idle_connections::sweep(clock::time_point now) {
  if (now - last_sweep_ < std::chrono::seconds(1)) return;
  last_sweep_ = now;
  for (auto it = by_sandbox_.begin(); it != by_sandbox_.end();) {
    auto& items = it->second.items;
    std::size_t stale = 0;
    while (stale < items.size() && now - items[stale].since >= options_.timeout) ++stale;
    drop(it->second, stale);
    it = items.empty() ? by_sandbox_.erase(it) : std::next(it);
  }
}

std::optional<agent_stream> idle_connections::take(const std::string& sandbox_id, const std::string& container_id,
                                                   clock::time_point now) {
  sweep(now);
  auto it = by_sandbox_.find(sandbox_id);
  if (it == by_sandbox_.end()) return std::nullopt;
  kept& k = it->second;
  if (k.container_id != container_id) {  // the sandbox runs in another container now
    forget(sandbox_id);
    return std::nullopt;
  }
  std::optional<agent_stream> found;
  while (!k.items.empty() && !found) {
    parked p = std::move(k.items.back());
    k.items.pop_back();
    --count_;
    if (now - p.since < options_.timeout && still_quiet(p.stream))
      found.emplace(std::move(p.stream));
    else
      p.stream.close();
  }
  if (k.items.empty()) by_sandbox_.erase(it);
  return found;
}

void idle_connections::park(const std::string& sandbox_id, const std::string& container_id, agent_stream stream,
                            clock::time_point now) {
  sweep(now);
  if (count_ >= options_.total || options_.per_sandbox == 0 || options_.timeout <= std::chrono::milliseconds(0)) {
    stream.close();
    return;
  }
  kept& k = by_sandbox_[sandbox_id];
  if (k.container_id != container_id) {
    drop(k, k.items.size());
    k.container_id = container_id;
  }
  if (k.items.size() >= options_.per_sandbox) drop(k, 1);  // the oldest goes: the newest is likelier alive
  k.items.push_back({std::move(stream), now});
  ++count_;
}

void idle_connections::forget(const std::string& sandbox_id) {
  auto it = by_sandbox_.find(sandbox_id);
  if (it == by_sandbox_.end()) return;
  drop(it->second, it->second.items.size());
  by_sandbox_.erase(it);
}

}  // namespace sandfort::sandbox
