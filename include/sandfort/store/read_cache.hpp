#pragma once
// Rows a hot path read lately, kept so that the next request need not read them again. On the
// I/O thread's connection every SQLite read re-reads its pages from the file after any other
// connection's commit — the audit writer's, after every command — so a per-request lookup costs
// system calls and page decoding each time (auth::key_cache, the started sandboxes of
// sandbox::command_service).
//
// An entry is trusted only while
// - its store's generation has not moved since the entry was read: every change that store
//   makes in this process moves it, committed or not (org_store::generation(),
//   sandbox_store::generation()), so the first read after a change goes to the database;
// - it is younger than max_age: the bound on a change another program makes to the file;
// and the caller keeps only what it read outside a transaction (a row read inside one may yet be
// rolled back). Not thread-safe: one per thread, like the connection it stands in front of.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>

#include "sandfort/core/clock.hpp"

namespace sandfort::store {

template <typename Row>
class read_cache {
 public:
  using generation_fn = std::uint64_t (*)();
  static constexpr std::chrono::seconds default_max_age{1};
  static constexpr std::size_t default_capacity = 4096;

  explicit read_cache(generation_fn generation, std::chrono::milliseconds max_age = default_max_age,
                      std::size_t capacity = default_capacity)
      : generation_(generation), max_age_(max_age), capacity_(capacity) {}

  // The row kept under key if it may still be trusted at `now`, else null (and it is dropped).
  Row* find(const std::string& key, time_point now) {
    auto it = entries_.find(key);
    if (it == entries_.end()) return nullptr;
    const entry& e = it->second;
    // A clock set back counts as old, too.
    if (e.generation != generation_() || now < e.read_at || now - e.read_at >= max_age_) {
      entries_.erase(it);
      return nullptr;
    }
    return &it->second.row;
  }

  // Keeps a row read at `now`, when the store's generation was `generation` (taken before the
  // read). When full, everything kept is dropped first: the bound is what matters, and a full
  // cache means more rows in use than it is for.
  void put(const std::string& key, Row row, std::uint64_t generation, time_point now) {
    if (entries_.size() >= capacity_ && !entries_.contains(key)) entries_.clear();
    entries_.insert_or_assign(key, entry{std::move(row), generation, now});
  }

  std::uint64_t generation() const { return generation_(); }
  std::size_t size() const { return entries_.size(); }

 private:
  struct entry {
    Row row;
    std::uint64_t generation;
    time_point read_at;
  };
  generation_fn generation_;
  std::chrono::milliseconds max_age_;
  std::size_t capacity_;
  std::unordered_map<std::string, entry> entries_;
};

}  // namespace sandfort::store
