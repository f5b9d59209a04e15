#pragma once
// What one source may hold of a listener before it does any work. Anyone who can reach a port
// can open connections and send nothing (or one header byte at a time): each costs the listener
// a descriptor and a slot under its cap for as long as the connection is allowed to wait. So
// such connections are counted per source and in total against caps.
//
// Shared by the HTTP listeners (API and preview: `connection_book` below, used by server.cpp)
// and the egress proxy (src/proxy/admission.cpp: `source_counts` and `refusal_log`).
// Bookkeeping only: one thread, no sockets, the time passed in.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

namespace sandfort::http {

// The key a connection from `address` is counted under: the address itself (IPv4-mapped IPv6 as
// IPv4), an IPv6 address by its /64 (one subscriber's allocation: a cap per address of it would
// be no cap). Anything that is not an IP address ("unix") is its own key.
std::string source_key(std::string_view address);

enum class over_cap { none, source, total };

// Connections counted per source and in total, each against a cap.
class source_counts {
 public:
  source_counts(std::size_t per_source, std::size_t total) : per_source_(per_source), cap_(total) {}

  // Which cap one more connection from `source` would pass (the total first).
  over_cap check(const std::string& source) const;
  // Counts one in when it fits under both caps.
  over_cap take(const std::string& source);
  // Counts one in whatever the caps say (the caller made room, or the source is not capped).
  void add(const std::string& source);
  void release(const std::string& source);

  std::size_t of(const std::string& source) const;
  std::size_t total() const { return total_; }
  std::size_t per_source_cap() const { return per_source_; }
  std::size_t total_cap() const { return cap_; }

 private:
  std::size_t per_source_;
  std::size_t cap_;
  std::size_t total_ = 0;
  std::unordered_map<std::string, std::size_t> by_source_;
};

// Refusals reported in few lines: at most one per source per period, each saying how many
// refusals it stands for. A flood from many addresses costs a bounded memory: sources quiet for
// a period are forgotten once many are remembered.
class refusal_log {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  explicit refusal_log(std::chrono::milliseconds period) : period_(period) {}

  // Counts one refusal of `source`; returns how many to report in a line now (this one
  // included), or nullopt while this source's last line is recent (it joins the next line).
  std::optional<std::uint64_t> note(const std::string& source, time_point now);

 private:
  struct entry {
    time_point last_line;
    std::uint64_t unlogged = 0;
  };
  std::chrono::milliseconds period_;
  std::unordered_map<std::string, entry> sources_;
};

struct listener_limits {
  std::size_t max_connections = 1024;
  std::size_t idle_per_source = 64;
  std::size_t idle = 512;
};

// A listener's open connections, for admission. Each is idle (accepted, or kept alive after a
// response, and without a complete request: it does no work) or busy (a request being answered,
// a stream, a WebSocket: it does work for someone who sent a whole request). Idle ones are
// counted per source and in total; a connection that would pass a cap, or find max_connections
// reached, makes room by closing the oldest idle connection (of its own source for the
// per-source cap): a new connection always gets in unless every slot is busy. Busy connections
// are never closed here, nor is an idle one whose `has_input` says a request is coming in (bytes
// waiting, a header being read: the server's rules in server.cpp): a burst of requests from one
// client arrives as many connections at once, each idle for a moment before its header is
// parsed, and those must not close each other. A cap may be passed for that moment.
class connection_book {
  struct entry {
    std::string source;  // "" for a trusted proxy: counted in the total only
    std::function<void()> close;
    std::function<bool()> has_input;
    bool idle = true;
    bool evicted = false;
    std::list<entry*>::iterator in_idle;  // its place among the idle, oldest first
  };

 public:
  using ticket = std::list<entry>::iterator;
  enum class reason { source_cap, idle_cap, connection_cap };
  // Told of every connection closed to make room (for the log).
  using eviction_observer = std::function<void(const std::string& source, reason why)>;

  explicit connection_book(listener_limits limits, eviction_observer observer = {});

  // True when one more connection fits under max_connections, after closing the oldest idle one
  // if needed; false when every connection is busy.
  bool make_room();
  // A connection accepted from `source` ("" for a trusted proxy), idle; `close` closes its
  // socket at once (its owner notices and calls closed()); `has_input` says whether a request is
  // coming in on it now (empty: never). Makes room under the idle caps first.
  ticket opened(std::string source, std::function<void()> close, std::function<bool()> has_input = {});
  // A complete request: the connection does work now.
  void busy(ticket t);
  // Waiting for a request again (kept alive). Makes room under the idle caps first.
  void idle(ticket t);
  // The connection ended (whether or not it was evicted).
  void closed(ticket t);

  std::size_t open() const { return open_; }
  std::size_t idle_count() const { return idle_.size(); }
  std::size_t idle_of(const std::string& source) const { return counts_.of(source); }
  std::uint64_t evicted(reason why) const { return evicted_[static_cast<int>(why)]; }
  const listener_limits& limits() const { return limits_; }

 private:
  void enter_idle(entry& e);
  void leave_idle(entry& e);
  bool evict_oldest(const std::string* of_source, reason why);

  listener_limits limits_;
  eviction_observer observer_;
  std::list<entry> entries_;
  std::list<entry*> idle_;  // oldest first
  source_counts counts_;    // idle connections, per source (trusted proxies under "")
  std::size_t open_ = 0;    // entries not evicted
  std::uint64_t evicted_[3] = {0, 0, 0};
};

}  // namespace sandfort::http
