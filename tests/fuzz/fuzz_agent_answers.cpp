// Attacker: root inside a sandbox, who can replace the agent and answer sandfortd's requests with
// any bytes: exec results, port lists, error bodies. sandfortd must turn each into a result or an
// error, never crash, and never take more from it than the fields it knows.
//
// The first byte picks the answer: 0 exec result JSON, 1 port list, 2 error body (status from
// the second byte).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "sandbox/agent_answers.hpp"
#include "support.hpp"

using namespace sandfort;
using namespace sandfort::sandbox;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return 0;
  std::string body(reinterpret_cast<const char*>(data) + 2, size - 2);
  switch (data[0] % 3) {
    case 0: {
      auto j = nlohmann::json::parse(body, nullptr, false);
      auto r = detail::exec_result_from(j);
      if (!r) FUZZ_CHECK(r.err().code == errc::internal);
      // What the connector runs (sandfortd's own reader): the same result for every input.
      auto same = detail::parse_exec_answer(body);
      FUZZ_CHECK(same.ok() == r.ok());
      if (r && same)
        FUZZ_CHECK(same->exit_code == r->exit_code && same->stdout_text == r->stdout_text &&
                   same->stderr_text == r->stderr_text && same->stdout_b64 == r->stdout_b64 &&
                   same->stderr_b64 == r->stderr_b64 && same->duration_ms == r->duration_ms &&
                   same->timed_out == r->timed_out && same->truncated == r->truncated &&
                   same->oom_killed == r->oom_killed);
      break;
    }
    case 1: {
      auto ports = detail::parse_port_list(body);
      if (ports)
        for (const auto& p : *ports) FUZZ_CHECK(p.port >= 1 && p.port <= 65535);
      break;
    }
    default: {
      unsigned status = 300u + data[1] * 2u;
      auto e = detail::agent_error(status, body);
      FUZZ_CHECK(e.message.size() <= 4096 || e.message.starts_with("agent answered"));
      FUZZ_CHECK(e.code == (status == 400 ? errc::invalid_argument : errc::internal));
      break;
    }
  }
  return 0;
}
