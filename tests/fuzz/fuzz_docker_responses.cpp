// Attacker: whoever answers on the Docker socket (a compromised or impostor engine) and, more
// realistically, whatever a sandbox controls inside Docker's answers: container names, labels,
// image names, network names, event attributes and the pull stream's messages reach sandfortd
// through these parsers. Also the image references API clients name in "snapshot".
//
// The first byte picks the parser; the rest is the body (JSON where the engine sends JSON).

#include <cstdint>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <string>
#include <string_view>

#include "docker/api_version.hpp"
#include "docker/engine_errors.hpp"
#include "sandfort/docker/engine.hpp"
#include "sandfort/docker/image_ref.hpp"
#include "sandfort/docker/events.hpp"
#include "sandfort/docker/messages.hpp"
#include "support.hpp"

using namespace sandfort;
using namespace sandfort::docker;
using nlohmann::json;

namespace {

void check_image_reference(std::string_view text) {
  auto r = parse_image_reference(text);
  if (!r) return;
  FUZZ_CHECK(!r->path.empty());
  (void)r->host();
  (void)r->port();
  // Written back, it reads the same.
  std::string again = (r->registry.empty() ? "" : r->registry + "/") + r->path + (r->tag.empty() ? "" : ":" + r->tag) +
                      (r->digest.empty() ? "" : "@" + r->digest);
  auto second = parse_image_reference(again);
  FUZZ_CHECK(second.ok());
  FUZZ_CHECK(second->registry == r->registry && second->path == r->path && second->tag == r->tag &&
             second->digest == r->digest);
}

void events(std::string_view stream) {
  line_splitter lines(4096);
  event_subscription sub{{"io.sandfort.managed=true"}, {"die", "start"}, {"sandfort"}, {"connect"}};
  // Two pieces, cut where the first byte of the stream says.
  std::size_t cut = stream.empty() ? 0 : static_cast<unsigned char>(stream[0]) % (stream.size() + 1);
  for (auto piece : {stream.substr(0, cut), stream.substr(cut)}) {
    for (const auto& line : lines.feed(piece)) {
      FUZZ_CHECK(line.text.size() <= 4096);
      if (line.lost) FUZZ_CHECK(line.text.empty());
      auto ev = parse_event(line.text);
      if (ev) (void)subscription_matches(sub, *ev);
    }
  }
}

}  // namespace

// status_error() logs each answer it reads; millions of lines would only slow the run.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  unsigned kind = data[0] % 8;
  switch (kind) {
    case 0: check_image_reference(body); return 0;
    case 1: events(body); return 0;
    case 2: {
      (void)detail::engine_message(body);
      (void)detail::status_error(404, body, "inspect");
      auto reason = detail::pull_failure_reason(body);
      (void)detail::classify_pull_failure(reason);
      return 0;
    }
    case 3: {
      auto [a, b] = fuzz::split(body, std::string_view("\0", 1));
      auto c = detail::compare_api_versions(a, b);
      auto d = detail::compare_api_versions(b, a);
      FUZZ_CHECK(c.has_value() == d.has_value());
      if (c) FUZZ_CHECK((*c > 0) == (*d < 0) && (*c == 0) == (*d == 0));
      if (c && a == b) FUZZ_CHECK(*c == 0);
      (void)first_host_address(std::string(a));
      return 0;
    }
    default: break;
  }
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return 0;
  switch (kind) {
    case 4: {
      auto v = parse_version(j);
      if (v) {
        auto n = negotiate_api_version(*v);
        if (n) FUZZ_CHECK(detail::compare_api_versions(*n, newest_known_api).value_or(1) <= 0);
      }
      break;
    }
    case 5: (void)parse_network(j); (void)parse_volume(j); break;
    case 6: (void)parse_volume_list(j); (void)parse_image_list(j); (void)parse_image_details(j); break;
    default: (void)parse_stats(j); break;
  }
  return 0;
}
