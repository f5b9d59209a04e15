#pragma once
// What `sandfort login` checks before it stores anything: that the URL is sandfortd's API (not
// its preview listener or some other server) and that the API accepts the key. Each failure says
// what was wrong with the URL or the key; none suggests running `sandfort login`, which is what
// the user is doing.

#include <nlohmann/json.hpp>
#include <string>

namespace sandfort::cli {

// What a login that cannot reach the daemon suggests instead of `sandfort login`.
inline constexpr const char* login_unreachable_hint =
    "is sandfortd running there, and is that its API address (its `listen` setting, 127.0.0.1:8080 by default)?";

// GET /v1/whoami at url with key: its JSON, or a failure naming the mistake.
nlohmann::json whoami_for_login(const std::string& url, const std::string& key);

// A failure when `key` is visibly not an API key's secret (a key id, say), before asking the daemon.
void check_key_shape(const std::string& key);

}  // namespace sandfort::cli
