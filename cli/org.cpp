// `sandfort org …`: an organization's guardrails through the API (docs/api.md, "Identity"): its
// limits and their use, the operator setting them, and its kill switch.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>

#include "api_client.hpp"
#include "commands.hpp"
#include "failure.hpp"

namespace sandfort::cli {
using nlohmann::json;

namespace {

constexpr const char* limit_fields[] = {"max_sandboxes", "max_cpus",      "max_memory_mb",   "allowed_images",
                                        "max_volumes",   "max_snapshots", "allowed_runtimes"};

// The organization the command names, else the caller's own: the route wants an id or a name.
std::string org_or_own(api_client& client, const std::string& org) {
  if (!org.empty()) return org;
  json who = client.call(verb::get, "/v1/whoami");
  if (who.contains("org_id") && who["org_id"].is_string()) return who["org_id"].get<std::string>();
  throw failure("GET /v1/whoami named no organization; give one");
}

std::string org_path(const std::string& org, const char* leaf) { return "/v1/orgs/" + url_encode(org) + "/" + leaf; }

// 32 not 32.0, 1.5 as 1.5: CPUs are fractional, the rest are counts.
std::string limit_cell(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v.get<double>());
    return buf;
  }
  return v.dump();
}

json field(const json& j, const char* object, const char* key) {
  if (!j.contains(object) || !j[object].is_object() || !j[object].contains(key)) return nullptr;
  return j[object][key];
}

void print_limits(const json& v) {
  std::set<std::string> own;
  if (v.contains("own") && v["own"].is_array())
    for (const auto& f : v["own"])
      if (f.is_string()) own.insert(f.get<std::string>());
  const std::pair<const char*, const char*> in_use[] = {
      {"max_sandboxes", "sandboxes"}, {"max_cpus", "cpus"},       {"max_memory_mb", "memory_mb"},
      {"allowed_images", ""},         {"max_volumes", "volumes"}, {"max_snapshots", "snapshots"},
      {"allowed_runtimes", ""}};
  std::cout << "org: " << limit_cell(v.value("org_id", json())) << "\n";
  std::vector<std::vector<std::string>> rows = {{"LIMIT", "VALUE", "IN USE", "SET FOR THIS ORG"}};
  for (const auto& [limit, usage] : in_use)
    rows.push_back({limit, limit_cell(field(v, "limits", limit)), *usage ? limit_cell(field(v, "usage", usage)) : "-",
                    own.count(limit) ? "yes" : "no (default)"});
  print_table(rows);
  std::cout << "running: " << limit_cell(field(v, "usage", "running")) << "\n";
  const json stopped = v.value("stopped", json());
  if (!stopped.is_object()) {
    std::cout << "kill switch: off\n";
    return;
  }
  std::cout << "kill switch: on since " << limit_cell(stopped.value("since", json()))
            << (stopped.value("by_superadmin", false) ? " (thrown by the superadmin: only the superadmin lifts it)" : "")
            << "\n";
}

json limits_body(const org_limits_options& o) {
  json body = json::object();
  if (o.max_sandboxes) body["max_sandboxes"] = *o.max_sandboxes;
  if (o.max_cpus) body["max_cpus"] = *o.max_cpus;
  if (o.max_memory_mb) body["max_memory_mb"] = *o.max_memory_mb;
  if (o.max_volumes) body["max_volumes"] = *o.max_volumes;
  if (o.max_snapshots) body["max_snapshots"] = *o.max_snapshots;
  if (!o.allowed_images.empty()) body["allowed_images"] = o.allowed_images;
  if (!o.allowed_runtimes.empty()) body["allowed_runtimes"] = o.allowed_runtimes;
  for (const auto& name : o.reset) {
    if (body.contains(name) && !body[name].is_null())
      throw failure("--reset " + name + " and a new value for it: give one of them", 2);
    body[name] = nullptr;
  }
  if (body.empty()) {
    std::string all;
    for (const char* f : limit_fields) all += std::string(all.empty() ? "" : ", ") + f;
    throw failure("nothing to set: give --max-sandboxes, --max-cpus, --max-memory-mb, --max-volumes, "
                  "--max-snapshots, --allowed-image, --allowed-runtime or --reset (" +
                      all + ")",
                  2);
  }
  return body;
}

}  // namespace

int cmd_org_limits(const std::string& org, bool as_json) {
  api_client client = connect_api();
  json v = client.call(verb::get, org_path(org_or_own(client, org), "limits"));
  if (as_json)
    std::cout << v.dump(2) << "\n";
  else
    print_limits(v);
  return 0;
}

int cmd_org_set_limits(const org_limits_options& o) {
  json body = limits_body(o);
  api_client client = connect_api();
  json v = client.call(verb::put, org_path(o.org, "limits"), &body);
  if (o.json)
    std::cout << v.dump(2) << "\n";
  else
    print_limits(v);
  return 0;
}

int cmd_org_stop_all(const std::string& org, bool as_json) {
  api_client client = connect_api();
  json report = client.call(verb::post, org_path(org_or_own(client, org), "stop-all"));
  const json failed = report.value("failed", json::object());
  if (as_json) {
    std::cout << report.dump(2) << "\n";
  } else {
    const json stopped = report.value("stopped", json::array());
    std::cout << "kill switch on for " << limit_cell(report.value("org_id", json())) << ": stopped " << stopped.size()
              << " sandbox(es); new and restarted ones are refused until `sandfort org lift`\n";
    for (const auto& id : stopped) std::cout << "stopped " << limit_cell(id) << "\n";
    for (const auto& [id, why] : failed.items()) std::cerr << "sandfort: could not stop " << id << ": " << limit_cell(why) << "\n";
  }
  return failed.empty() ? 0 : 1;
}

int cmd_org_lift(const std::string& org) {
  api_client client = connect_api();
  const std::string named = org_or_own(client, org);
  client.call(verb::delete_, org_path(named, "stop-all"));
  std::cout << "kill switch lifted for " << named << "; stopped sandboxes stay stopped until started\n";
  return 0;
}

}  // namespace sandfort::cli
