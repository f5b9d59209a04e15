// Attacker: root inside a sandbox, who can replace the agent and answer a streamed exec with any
// bytes. sandfortd relays the agent's SSE stream through capped_events (src/sandbox/output_cap.hpp),
// which promises the caller, whatever the agent sends: only stdout, stderr, exit and error events,
// each one `event:` line and one `data:` line holding a JSON object, at most the cap of output per
// stream, and at most one final event (exit or error), last. This target checks each promise on
// what reaches the caller, read as an SSE client reads it (\r, \n and \r\n all end a line).
//
// Input: byte 0 picks the cap, byte 1 seeds how the rest is cut into writes (the agent's bytes
// arrive in pieces of any size), byte 2 how many writes the caller's side accepts before it goes
// away; the rest is the agent's stream.

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/output_cap.hpp"
#include "support.hpp"

using namespace sandfort;
using namespace sandfort::sandbox;

namespace {

struct caller final : byte_sink {
  std::string received;
  std::size_t writes_left = 0;
  boost::asio::awaitable<bool> write(std::string_view bytes) override {
    if (writes_left == 0) co_return false;
    --writes_left;
    received.append(bytes);
    co_return true;
  }
};

// Splits an SSE stream into events as the specification does: lines end at \r\n, \n or \r; a
// blank line dispatches. Each event is its list of lines.
std::vector<std::vector<std::string>> sse_events(std::string_view s) {
  std::vector<std::vector<std::string>> events;
  std::vector<std::string> lines;
  std::string line;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c != '\r' && c != '\n') {
      line.push_back(c);
      continue;
    }
    if (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
    if (line.empty()) {
      if (!lines.empty()) events.push_back(std::move(lines));
      lines.clear();
    } else {
      lines.push_back(std::move(line));
      line.clear();
    }
  }
  FUZZ_CHECK(lines.empty() && line.empty());  // nothing is left half-sent
  return events;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  static constexpr std::uint64_t caps[] = {0, 1, 2, 3, 7, 64, 1000, 10u << 20};
  const std::uint64_t cap = caps[data[0] % 8];
  std::uint32_t seed = data[1] * 2654435761u + 1;
  caller out;
  out.writes_left = data[2] < 200 ? 1000 : data[2] - 200;
  std::string_view agent(reinterpret_cast<const char*>(data) + 3, size - 3);

  boost::asio::io_context io;
  capped_events relay(out, cap);
  boost::asio::co_spawn(
      io,
      [&]() -> boost::asio::awaitable<void> {
        while (!agent.empty()) {
          seed = seed * 1103515245u + 12345u;
          std::size_t piece = 1 + (seed >> 16) % 97;
          if (!co_await relay.write(agent.substr(0, piece))) co_return;
          agent.remove_prefix(std::min(piece, agent.size()));
        }
      },
      boost::asio::detached);
  io.run();

  std::uint64_t sent[2] = {0, 0};
  bool final_seen = false;
  for (const auto& event : sse_events(out.received)) {
    FUZZ_CHECK(!final_seen);  // nothing after exit or error
    FUZZ_CHECK(event.size() == 2);
    FUZZ_CHECK(event[0].starts_with("event: ") && event[1].starts_with("data: "));
    const std::string name = event[0].substr(7);
    auto j = nlohmann::json::parse(event[1].substr(6), nullptr, false);
    FUZZ_CHECK(j.is_object());
    if (name == "stdout" || name == "stderr") {
      FUZZ_CHECK(j.contains("data") && j["data"].is_string());
      sent[name == "stdout" ? 0 : 1] += j["data"].get_ref<const std::string&>().size();
    } else {
      FUZZ_CHECK(name == "exit" || name == "error");
      final_seen = true;
    }
  }
  FUZZ_CHECK(sent[0] <= cap && sent[1] <= cap);
  return 0;
}
