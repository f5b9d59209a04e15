#pragma once
// Holding a (possibly hostile) agent's command output to the caller's cap, in the buffered
// result and in the relayed event stream. No I/O but the sink's, so it is unit-tested
// (commands_test.cpp) and fuzzed (tests/fuzz/fuzz_sse_relay.cpp) without a container.

#include <boost/asio/awaitable.hpp>
#include <cstdint>
#include <string>
#include <string_view>

#include "sandfort/sandbox/agent_connector.hpp"
#include "sandfort/sandbox/types.hpp"

namespace sandfort::sandbox {

// The largest length up to `at` (< s.size()) that ends at a UTF-8 character boundary.
std::size_t char_boundary(std::string_view s, std::size_t at);

// Cuts each stream of r to at most cap bytes (at a character boundary; the base64 form, when
// asked for, to the same number of raw bytes) and sets r.truncated if anything was cut.
void hold_to_cap(exec_result& r, std::uint64_t cap);

// The agent's events are `event: stdout|stderr` with `data: {"data": text, "data_b64"?: …}`,
// then one `exit` (or `error`). Every event is relayed rebuilt from its parsed data (so its size
// follows from the text's and it holds exactly one `event:` and one `data:` line), output beyond
// the cap per stream is cut (the exit event then says truncated), a final event whose data is not
// a JSON object becomes an `error`, and anything else is dropped: whatever the agent sends, the
// caller gets at most the cap per stream and at most one final event, last.
class capped_events final : public byte_sink {
 public:
  capped_events(byte_sink& out, std::uint64_t cap) : out_(out), cap_(cap) {}

  // False when the reader is gone or the agent sent an event larger than any of its own.
  boost::asio::awaitable<bool> write(std::string_view bytes) override;

  // The agent's stream broke after events went out and before the final one (the agent was
  // killed, its sandbox stopped): `e` becomes that final event, an `error`. False, writing
  // nothing, when no event went out yet (the error is then the caller's whole answer) or the
  // final one did.
  boost::asio::awaitable<bool> fail(const error& e);

 private:
  boost::asio::awaitable<bool> emit(std::string_view name, const nlohmann::json& data);
  boost::asio::awaitable<bool> relay(std::string_view event);
  boost::asio::awaitable<bool> relay_output(std::string_view name, int stream, nlohmann::json& j);

  byte_sink& out_;
  std::uint64_t cap_;
  std::string pending_;
  std::uint64_t sent_[2] = {0, 0};
  bool cut_ = false;
  bool finished_ = false;
  bool wrote_ = false;  // an event went out
};

}  // namespace sandfort::sandbox
