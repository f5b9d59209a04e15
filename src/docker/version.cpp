#include "sandfort/docker/engine.hpp"
#include "sandfort/docker/messages.hpp"

#include <charconv>
#include <system_error>

#include "api_version.hpp"

namespace sandfort::docker {

namespace detail {
namespace {

struct parsed_version {
  unsigned long major = 0;
  unsigned long minor = 0;
};

std::optional<unsigned long> parse_number(std::string_view s) {
  if (s.empty()) return std::nullopt;
  unsigned long n = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return n;
}

std::optional<parsed_version> parse_api_version(std::string_view s) {
  auto dot = s.find('.');
  if (dot == std::string_view::npos) return std::nullopt;
  auto major = parse_number(s.substr(0, dot));
  auto minor = parse_number(s.substr(dot + 1));
  if (!major || !minor) return std::nullopt;
  return parsed_version{*major, *minor};
}

}  // namespace

std::optional<int> compare_api_versions(std::string_view a, std::string_view b) {
  auto va = parse_api_version(a);
  auto vb = parse_api_version(b);
  if (!va || !vb) return std::nullopt;
  if (va->major != vb->major) return va->major < vb->major ? -1 : 1;
  if (va->minor != vb->minor) return va->minor < vb->minor ? -1 : 1;
  return 0;
}

}  // namespace detail

namespace {

std::string string_field(const nlohmann::json& body, const char* key) {
  auto it = body.find(key);
  if (it == body.end() || !it->is_string()) return {};
  return it->get<std::string>();
}

}  // namespace

result<version_info> parse_version(const nlohmann::json& body) {
  if (!body.is_object()) return make_error(errc::internal, "Docker's /version answer is not a JSON object");
  version_info info{string_field(body, "Version"), string_field(body, "ApiVersion"),
                    string_field(body, "MinAPIVersion")};
  if (!detail::compare_api_versions(info.api_version, info.api_version))
    return make_error(errc::internal, "Docker's /version answer has no usable ApiVersion (got \"" +
                                          info.api_version + "\")");
  // Engines older than API 1.25 do not report a minimum; they accept anything down to 1.12.
  if (info.min_api_version.empty()) info.min_api_version = "1.12";
  if (!detail::compare_api_versions(info.min_api_version, info.min_api_version))
    return make_error(errc::internal, "Docker's /version answer has an unusable MinAPIVersion (got \"" +
                                          info.min_api_version + "\")");
  return info;
}

result<std::string> negotiate_api_version(const version_info& engine_says) {
  using detail::compare_api_versions;
  auto engine_max_vs_ours = compare_api_versions(engine_says.api_version, newest_known_api);
  if (!engine_max_vs_ours)
    return make_error(errc::internal, "cannot read Docker's API version \"" + engine_says.api_version + "\"");
  std::string chosen = *engine_max_vs_ours < 0 ? engine_says.api_version : std::string(newest_known_api);

  const std::string engine_name = "Docker " + (engine_says.version.empty() ? std::string("(unknown version)")
                                                                            : engine_says.version);
  if (auto c = compare_api_versions(chosen, oldest_supported_api); !c || *c < 0)
    return make_error(errc::unavailable,
                      engine_name + " speaks Engine API " + engine_says.api_version + " at most, but Sandfort needs " +
                          oldest_supported_api + " or newer (it knows up to " + newest_known_api +
                          "); upgrade Docker to 20.10 or later");
  if (auto c = compare_api_versions(chosen, engine_says.min_api_version); !c || *c < 0)
    return make_error(errc::unavailable,
                      engine_name + " accepts Engine API " + engine_says.min_api_version +
                          " or newer, but Sandfort knows API versions only up to " + newest_known_api +
                          "; upgrade Sandfort, or use a Docker release that still accepts API " + newest_known_api);
  return chosen;
}

}  // namespace sandfort::docker
