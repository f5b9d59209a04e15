#pragma once
// Docker's event stream (GET /events) as pure functions: reading its lines, the filters asked
// for, and which events a subscription wants. unix_engine::follow_events runs them on the wire.

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "sandfort/docker/engine.hpp"

namespace sandfort::docker {

// One line of the stream (without its newline); pure, so it is unit-tested on recorded lines.
result<engine_event> parse_event(std::string_view line);
// The `filters` query of GET /events for sub (types and actions).
nlohmann::json event_filters(const event_subscription& sub);
// Whether ev is one sub asked for (a lost event always is).
bool subscription_matches(const event_subscription& sub, const engine_event& ev);
// Docker's `since`: "<seconds>.<nanoseconds>".
std::string since_parameter(std::int64_t unix_nano);

// Splits a byte stream into lines of at most `limit` bytes without holding more than that: a
// longer line is dropped as it arrives and reported once, at its newline, as lost.
class line_splitter {
 public:
  explicit line_splitter(std::size_t limit) : limit_(limit) {}
  struct line {
    std::string text;
    bool lost = false;  // over the limit: text is empty
  };
  // Appends bytes; returns the lines they completed.
  std::vector<line> feed(std::string_view bytes);

 private:
  std::size_t limit_;
  std::string partial_;
  bool overflowing_ = false;
};

}  // namespace sandfort::docker
