// Attacker: any API client with a key (or a token), i.e. every tenant: the JSON bodies of
// POST /v1/sandboxes (create), PATCH /v1/sandboxes/{id}, POST .../process/exec and .../code-run,
// read by the API's own parse_create, parse_update, parse_exec and parse_code_run
// (src/api/sandbox_bodies.cpp, with json_body.cpp compiled into this target).
//
// Invariants: a refusal is invalid_argument; an accepted body names only the fields docs/api.md gives
// it (an unknown field is refused, never ignored), and what was read is what the body says.
//
// The first byte picks the body kind; the rest is the body.

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "api/json_body.hpp"
#include "api/sandbox_bodies.hpp"
#include "support.hpp"

using namespace sandfort;
using nlohmann::json;

namespace {

// Every key of `j` is one of `allowed`.
bool only(const json& j, const std::set<std::string>& allowed) {
  for (const auto& [key, unused] : j.items())
    if (!allowed.count(key)) return false;
  return true;
}

// An integer field the body set is the integer read (absent or null: nothing read).
void same_int(const json& j, const char* key, const std::optional<std::int64_t>& read) {
  if (!j.contains(key) || j[key].is_null()) {
    FUZZ_CHECK(!read);
    return;
  }
  FUZZ_CHECK(read.has_value());
  const json& v = j[key];
  if (v.is_number_unsigned())
    FUZZ_CHECK(v.get<std::uint64_t>() == static_cast<std::uint64_t>(*read) && *read >= 0);
  else if (v.is_number_integer())
    FUZZ_CHECK(v.get<std::int64_t>() == *read);
  else  // 3.0 reads as 3
    FUZZ_CHECK(v.is_number_float() && v.get<double>() == static_cast<double>(*read));
}

void create(std::string_view body, const json& j) {
  auto c = api::parse_create(body);
  if (!c) {
    FUZZ_CHECK(c.err().code == errc::invalid_argument);
    return;
  }
  FUZZ_CHECK(only(j, {"name", "snapshot", "wait", "env", "labels", "egress_allowlist", "ttl_s", "idle_timeout_s",
                      "user", "workdir", "public_preview", "resources", "volumes"}));
  if (j.contains("resources") && !j["resources"].is_null()) {
    FUZZ_CHECK(j["resources"].is_object() && only(j["resources"], {"cpus", "memory_mb", "pids", "disk_mb"}));
    same_int(j["resources"], "disk_mb", c->disk_mb);
    same_int(j["resources"], "memory_mb", c->memory_mb);
    same_int(j["resources"], "pids", c->pids);
  }
  same_int(j, "ttl_s", c->ttl_s);
  same_int(j, "idle_timeout_s", c->idle_timeout_s);
  std::size_t volumes = j.contains("volumes") && j["volumes"].is_array() ? j["volumes"].size() : 0;
  FUZZ_CHECK(c->volumes.size() == volumes);
  for (const auto& v : c->volumes) FUZZ_CHECK(!v.name.empty() && !v.mount_path.empty());
  if (j.contains("env") && j["env"].is_object()) FUZZ_CHECK(c->env.size() == j["env"].size());
}

void update(std::string_view body, const json& j) {
  auto u = api::parse_update(body);
  if (!u) {
    FUZZ_CHECK(u.err().code == errc::invalid_argument);
    return;
  }
  FUZZ_CHECK(only(j, {"labels", "ttl_s", "idle_timeout_s", "egress_allowlist"}));
  same_int(j, "ttl_s", u->ttl_s);
  same_int(j, "idle_timeout_s", u->idle_timeout_s);
  // PATCH tells "absent" from "set to empty".
  FUZZ_CHECK(u->labels.has_value() == (j.contains("labels") && !j["labels"].is_null()));
  FUZZ_CHECK(u->egress_allowlist.has_value() == (j.contains("egress_allowlist") && !j["egress_allowlist"].is_null()));
}

void exec(std::string_view body, const json& j) {
  auto e = api::parse_exec(body);
  if (!e) {
    FUZZ_CHECK(e.err().code == errc::invalid_argument);
    return;
  }
  same_int(j, "timeout_s", e->timeout_s);
  if (j.contains("argv") && j["argv"].is_array()) FUZZ_CHECK(e->argv.size() == j["argv"].size());
}

void code_run(std::string_view body, const json& j) {
  auto c = api::parse_code_run(body);
  if (!c) {
    FUZZ_CHECK(c.err().code == errc::invalid_argument);
    return;
  }
  same_int(j, "timeout_s", c->timeout_s);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto parsed = api::parse_object(body);
  if (!parsed) {
    FUZZ_CHECK(parsed.err().code == errc::invalid_argument);
    // Every route reads its body with parse_object first: it refuses the same bodies.
    FUZZ_CHECK(!api::parse_exec(body));
    return 0;
  }
  FUZZ_CHECK(parsed->is_object());
  switch (data[0] % 4) {
    case 0: create(body, *parsed); break;
    case 1: update(body, *parsed); break;
    case 2: exec(body, *parsed); break;
    default: code_run(body, *parsed); break;
  }
  return 0;
}
