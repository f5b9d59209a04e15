// Attacker: any API client with a key (or a token), i.e. every tenant: the JSON bodies of
// POST /v1/sandboxes (create), PATCH /v1/sandboxes/{id}, POST .../process/exec and .../code-run.
//
// parse_object() and the typed read() functions are the real ones (src/api/json_body.cpp,
// compiled into this target). Which fields each body reads is copied from the parse_create,
// parse_update, parse_exec and parse_code_run of src/api/sandbox_routes.cpp: those sit in the
// api library with the whole service behind them (parse_create in an anonymous namespace); see
// docs/fuzzing.md for the proposed move that would let this target call them directly.
//
// The first byte picks the body kind; the rest is the body.

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "api/json_body.hpp"
#include "support.hpp"

using namespace sandfort;
using nlohmann::json;

namespace {

void read_volumes(const json& body, std::vector<sandbox::volume_request>& out) {
  if (!body.contains("volumes") || body["volumes"].is_null()) return;
  const json& list = body["volumes"];
  if (!list.is_array()) return;
  for (const auto& item : list) {
    if (!item.is_object()) return;
    sandbox::volume_request v;
    for (auto r : {api::read(item, "name", v.name), api::read(item, "mount_path", v.mount_path),
                   api::read(item, "read_only", v.read_only)})
      if (!r) return;
    out.push_back(std::move(v));
  }
}

void create(const json& j) {
  sandbox::create_request c;
  json resources = j.contains("resources") && !j["resources"].is_null() ? j["resources"] : json::object();
  if (!resources.is_object()) return;
  for (auto r : {api::read(j, "name", c.name), api::read(j, "snapshot", c.snapshot), api::read(j, "wait", c.wait),
                 api::read(j, "env", c.env), api::read(j, "labels", c.labels),
                 api::read(j, "egress_allowlist", c.egress_allowlist), api::read(j, "ttl_s", c.ttl_s),
                 api::read(j, "idle_timeout_s", c.idle_timeout_s), api::read(j, "user", c.user),
                 api::read(j, "workdir", c.workdir), api::read(j, "public_preview", c.public_preview),
                 api::read(resources, "cpus", c.cpus), api::read(resources, "memory_mb", c.memory_mb),
                 api::read(resources, "pids", c.pids)})
    if (!r) FUZZ_CHECK(r.err().code == errc::invalid_argument);
  read_volumes(j, c.volumes);
}

void update(const json& j) {
  sandbox::update_request u;
  for (auto r : {api::read(j, "labels", u.labels), api::read(j, "ttl_s", u.ttl_s),
                 api::read(j, "idle_timeout_s", u.idle_timeout_s), api::read(j, "egress_allowlist", u.egress_allowlist)})
    if (!r) FUZZ_CHECK(r.err().code == errc::invalid_argument);
}

void exec(const json& j) {
  sandbox::exec_request e;
  for (auto r : {api::read(j, "command", e.command), api::read(j, "argv", e.argv), api::read(j, "cwd", e.cwd),
                 api::read(j, "env", e.env), api::read(j, "stdin", e.stdin_data),
                 api::read(j, "timeout_s", e.timeout_s), api::read(j, "binary", e.binary)})
    if (!r) FUZZ_CHECK(r.err().code == errc::invalid_argument);
}

void code_run(const json& j) {
  sandbox::code_run_request c;
  for (auto r : {api::read(j, "language", c.language), api::read(j, "code", c.code), api::read(j, "argv", c.argv),
                 api::read(j, "env", c.env), api::read(j, "timeout_s", c.timeout_s)})
    if (!r) FUZZ_CHECK(r.err().code == errc::invalid_argument);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  auto parsed = api::parse_object(body);
  if (!parsed) {
    FUZZ_CHECK(parsed.err().code == errc::invalid_argument);
    return 0;
  }
  FUZZ_CHECK(parsed->is_object());
  switch (data[0] % 4) {
    case 0: create(*parsed); break;
    case 1: update(*parsed); break;
    case 2: exec(*parsed); break;
    default: code_run(*parsed); break;
  }
  return 0;
}
