#include "sandfort/sandbox/activity.hpp"

namespace sandfort::sandbox {

void activity_tracker::touch(const std::string& sandbox_id) { (*entries_)[sandbox_id].last = clk_.now(); }

activity_tracker::hold activity_tracker::busy(const std::string& sandbox_id) {
  entry& e = (*entries_)[sandbox_id];
  e.last = clk_.now();
  ++e.held;
  return hold(entries_, sandbox_id, clk_);
}

activity_tracker::hold::~hold() {
  if (id_.empty()) return;  // moved from
  auto t = table_.lock();
  if (!t) return;
  auto it = t->find(id_);
  if (it == t->end()) return;  // forgotten meanwhile (deleted)
  it->second.last = clk_->now();
  if (it->second.held > 0) --it->second.held;
}

std::chrono::seconds activity_tracker::idle_for(const std::string& sandbox_id) {
  auto [it, fresh] = entries_->try_emplace(sandbox_id, entry{clk_.now(), 0});
  if (fresh || it->second.held > 0) return std::chrono::seconds(0);
  return std::chrono::duration_cast<std::chrono::seconds>(clk_.now() - it->second.last);
}

void activity_tracker::forget(const std::string& sandbox_id) { entries_->erase(sandbox_id); }

}  // namespace sandfort::sandbox
