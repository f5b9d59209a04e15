#include "login_check.hpp"

#include <algorithm>
#include <cctype>

#include "api_client.hpp"
#include "failure.hpp"

namespace sandfort::cli {
using nlohmann::json;

namespace {

constexpr const char* nothing_saved = "; nothing was saved";

std::string lowercase(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// http://HOST:PORT of url with another port.
std::string with_port(const api_client& c, const std::string& port) {
  std::string host = c.host().find(':') != std::string::npos ? "[" + c.host() + "]" : c.host();
  return std::string(c.tls() ? "https://" : "http://") + host + ":" + port + c.prefix();
}

// True when url answers /healthz as sandfortd's API does ({"status": "ok", "version": …}).
bool answers_as_api(const std::string& url) {
  try {
    api_client probe(url, fixed_credentials(""));
    request_spec spec;
    spec.target = "/healthz";
    response r = probe.send(spec);
    auto j = json::parse(r.body, nullptr, false);
    return r.status == 200 && j.is_object() && j.contains("status") && j.contains("version");
  } catch (const failure&) {
    return false;
  }
}

// The preview listener answers every request that does not name a sandbox's port with a short
// text page about preview addresses: the daemon is there, but this is not its API.
[[noreturn]] void refuse_preview_port(const api_client& client, const std::string& url) {
  std::string text = "error: login failed: " + url +
                     " is sandfortd's preview listener (it serves the sandboxes' web ports), not its API" + nothing_saved;
  std::string guess = with_port(client, "8080");
  if (client.port() != "8080" && answers_as_api(guess))
    text += "\nhint: the API answers on " + guess + ": sandfort login --url " + guess;
  else
    text += "\nhint: the API is on another port of that host: sandfortd's `listen` setting (127.0.0.1:8080 by "
            "default; the preview port is `preview.listen`)";
  throw failure(text);
}

}  // namespace

void check_key_shape(const std::string& key) {
  if (key.starts_with("key-"))
    throw failure("error: login failed: " + key.substr(0, 24) +
                  " is an API key's id, not its secret" + nothing_saved +
                  "\nhint: the secret starts with sfk_ and is shown once, when the key is made");
}

json whoami_for_login(const std::string& url, const std::string& key) {
  api_client client(url, fixed_credentials(key));
  client.set_unreachable_hint(login_unreachable_hint);
  request_spec spec;
  spec.target = "/v1/whoami";
  response r = client.send(spec);
  auto j = json::parse(r.body, nullptr, false);
  const bool api_answer = j.is_object() && (r.status / 100 == 2 ? j.contains("role") : j.contains("error"));
  if (!api_answer) {
    if (lowercase(r.body.substr(0, 512)).find("preview") != std::string::npos) refuse_preview_port(client, url);
    throw failure("error: login failed: " + url + " does not answer as sandfortd's API (GET /v1/whoami: HTTP " +
                  std::to_string(r.status) + ")" + nothing_saved + "\nhint: " + login_unreachable_hint);
  }
  if (r.status == 401) {
    const auto& e = j["error"];
    std::string why = e.is_object() ? e.value("message", "refused") : "refused";
    throw failure("error: login failed: " + url + " refused the API key: " + why + " (unauthenticated" +
                  (r.request_id.empty() ? "" : ", request " + r.request_id) + ")" + nothing_saved +
                  "\nhint: an API key starts with sfk_ and is shown once, when it is made (`sandfort key create` "
                  "by an admin of the organization); check that it was copied whole");
  }
  if (r.status / 100 != 2) throw_api_error(r);
  return j;
}

}  // namespace sandfort::cli
