#pragma once
// When each sandbox was last used — a command, a session, a file, a terminal, a preview request —
// for the idle timeout (docs/guardrails.md). A long call (an exec, a terminal, a forwarded
// stream) holds its sandbox busy while it runs. Kept in memory only: after a restart every
// sandbox counts as used when the daemon first looks at it. Single-threaded (the I/O thread).

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>

#include "sandfort/core/clock.hpp"

namespace sandfort::sandbox {

class activity_tracker {
  struct entry {
    time_point last;
    int held = 0;
  };
  using table = std::unordered_map<std::string, entry>;

 public:
  explicit activity_tracker(const clock& clk) : clk_(clk) {}

  void touch(const std::string& sandbox_id);

  // Busy until destroyed (then touched). May outlive the tracker: it then does nothing.
  class hold {
   public:
    hold(std::weak_ptr<table> t, std::string id, const clock& clk) : table_(std::move(t)), id_(std::move(id)), clk_(&clk) {}
    hold(hold&& other) noexcept : table_(std::move(other.table_)), id_(std::exchange(other.id_, {})), clk_(other.clk_) {}
    hold& operator=(hold&&) = delete;
    ~hold();

   private:
    std::weak_ptr<table> table_;
    std::string id_;
    const clock* clk_;
  };
  hold busy(const std::string& sandbox_id);

  // How long the sandbox has been idle: zero while it is held; a sandbox never seen counts from now.
  std::chrono::seconds idle_for(const std::string& sandbox_id);
  void forget(const std::string& sandbox_id);

 private:
  const clock& clk_;
  std::shared_ptr<table> entries_ = std::make_shared<table>();
};

}  // namespace sandfort::sandbox
