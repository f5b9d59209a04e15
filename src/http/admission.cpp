#include "sandfort/http/admission.hpp"

#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <iterator>

namespace sandfort::http {

namespace {

// Sources a refusal log remembers before it forgets the quiet ones.
constexpr std::size_t max_remembered_sources = 4096;

}  // namespace

std::string source_key(std::string_view address) {
  boost::system::error_code ec;
  auto a = boost::asio::ip::make_address(std::string(address), ec);
  if (ec) return std::string(address);
  if (a.is_v4()) return a.to_string();
  auto v6 = a.to_v6();
  if (v6.is_v4_mapped()) return boost::asio::ip::make_address_v4(boost::asio::ip::v4_mapped, v6).to_string();
  auto bytes = v6.to_bytes();
  std::fill(bytes.begin() + 8, bytes.end(), 0);
  return boost::asio::ip::address_v6(bytes).to_string() + "/64";
}

over_cap source_counts::check(const std::string& source) const {
  if (total_ >= cap_) return over_cap::total;
  if (of(source) >= per_source_) return over_cap::source;
  return over_cap::none;
}

over_cap source_counts::take(const std::string& source) {
  auto why = check(source);
  if (why == over_cap::none) add(source);
  return why;
}

void source_counts::add(const std::string& source) {
  ++by_source_[source];
  ++total_;
}

void source_counts::release(const std::string& source) {
  --total_;
  if (auto it = by_source_.find(source); it != by_source_.end() && --it->second == 0) by_source_.erase(it);
}

std::size_t source_counts::of(const std::string& source) const {
  auto it = by_source_.find(source);
  return it == by_source_.end() ? 0 : it->second;
}

std::optional<std::uint64_t> refusal_log::note(const std::string& source, time_point now) {
  if (sources_.size() >= max_remembered_sources && !sources_.contains(source))
    std::erase_if(sources_, [&](const auto& s) { return now - s.second.last_line >= period_; });
  auto [it, first] = sources_.try_emplace(source, entry{now, 0});
  auto& e = it->second;
  ++e.unlogged;
  if (!first && now - e.last_line < period_) return std::nullopt;
  e.last_line = now;
  return std::exchange(e.unlogged, 0);
}

connection_book::connection_book(listener_limits limits, eviction_observer observer)
    : limits_(limits), observer_(std::move(observer)), counts_(limits.idle_per_source, limits.idle) {}

bool connection_book::make_room() {
  return open_ < limits_.max_connections || evict_oldest(nullptr, reason::connection_cap);
}

connection_book::ticket connection_book::opened(std::string source, std::function<void()> close,
                                                std::function<bool()> has_input) {
  auto t = entries_.emplace(entries_.end());
  t->source = std::move(source);
  t->close = std::move(close);
  t->has_input = std::move(has_input);
  t->idle = false;
  ++open_;
  enter_idle(*t);
  return t;
}

void connection_book::busy(ticket t) {
  if (t->evicted || !t->idle) return;
  leave_idle(*t);
}

void connection_book::idle(ticket t) {
  if (t->evicted || t->idle) return;
  enter_idle(*t);
}

void connection_book::closed(ticket t) {
  if (!t->evicted) {
    if (t->idle) leave_idle(*t);
    --open_;
  }
  entries_.erase(t);
}

void connection_book::enter_idle(entry& e) {
  // Room first (the connection entering is not among the idle yet, so never its own victim).
  // A trusted proxy ("") speaks for many clients: only the total applies to it.
  if (!e.source.empty())
    while (counts_.of(e.source) >= limits_.idle_per_source && evict_oldest(&e.source, reason::source_cap)) {
    }
  while (counts_.total() >= limits_.idle && evict_oldest(nullptr, reason::idle_cap)) {
  }
  e.idle = true;
  e.in_idle = idle_.insert(idle_.end(), &e);
  counts_.add(e.source);
}

void connection_book::leave_idle(entry& e) {
  idle_.erase(e.in_idle);
  counts_.release(e.source);
  e.idle = false;
}

bool connection_book::evict_oldest(const std::string* of_source, reason why) {
  auto victim = std::find_if(idle_.begin(), idle_.end(), [&](const entry* e) {
    return (!of_source || e->source == *of_source) && !(e->has_input && e->has_input());
  });
  if (victim == idle_.end()) return false;
  entry& e = **victim;
  leave_idle(e);
  e.evicted = true;
  --open_;
  ++evicted_[static_cast<int>(why)];
  if (observer_) observer_(e.source, why);
  if (auto close = std::move(e.close)) close();
  return true;
}

}  // namespace sandfort::http
