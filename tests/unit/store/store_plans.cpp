// store_plans: what a daemon's database does on a request's path, for tests/integration/
// test_history.py, which compares a store with a long history against one without.
//   store_plans DB ORG_ID SANDBOX_ID SANDBOX_NAME LABEL_KEY:VALUE CURSOR_ID KEY_SHA256
// prints one JSON object: the plan of every request-path statement (and whether it reads
// deleted rows), and for each lookup the store's own call, the SQLite VM steps it took (warm:
// run twice, the second counted) and what it found. Only reads: the daemon may be running.
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "plan_rules.hpp"
#include "sandfort/store/database.hpp"
#include "sandfort/store/org_store.hpp"
#include "sandfort/store/sandbox_store.hpp"

using namespace sandfort;
using namespace sandfort::store;

namespace {

std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string ids(const result<std::vector<sandbox_record>>& rows) {
  if (!rows) return "error: " + rows.err().message;
  std::string out;
  for (const auto& r : *rows) out += (out.empty() ? "" : " ") + r.id;
  return out;
}

sandbox_filter page(std::string state, std::vector<std::pair<std::string, std::string>> labels, std::string after) {
  sandbox_filter f;
  f.state = std::move(state);
  f.labels = std::move(labels);
  f.after_id = std::move(after);
  f.limit = 10;
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 8) {
    std::fprintf(stderr, "usage: store_plans DB ORG_ID SANDBOX_ID SANDBOX_NAME LABEL_KEY:VALUE CURSOR_ID KEY_SHA256\n");
    return 2;
  }
  const std::string org = argv[2], id = argv[3], name = argv[4], label = argv[5], cursor = argv[6], key = argv[7];
  const auto colon = label.find(':');
  if (colon == std::string::npos) return 2;
  const std::vector<std::pair<std::string, std::string>> labels{{label.substr(0, colon), label.substr(colon + 1)}};
  auto opened = database::open(argv[1]);
  if (!opened) {
    std::fprintf(stderr, "store_plans: %s\n", opened.err().message.c_str());
    return 1;
  }
  auto& db = **opened;
  auto plans = db.explain_request_paths();
  if (!plans) {
    std::fprintf(stderr, "store_plans: %s\n", plans.err().message.c_str());
    return 1;
  }

  auto found = [](const result<sandbox_record>& r) { return r ? r->id : std::string(to_string(r.err().code)); };
  const std::vector<std::pair<std::string, std::function<std::string()>>> calls = {
      {"api key by hash",
       [&] {
         auto k = org_store(db).find_api_key_by_hash(key);
         return k ? k->id : "not found";
       }},
      {"sandbox by id", [&] { return found(sandbox_store(db).get_sandbox(org, id)); }},
      {"sandbox by name", [&] { return found(sandbox_store(db).get_sandbox(org, name)); }},
      {"sandbox by a name nobody has", [&] { return found(sandbox_store(db).get_sandbox(org, name + "-nobody")); }},
      {"live sandbox by id", [&] { return found(sandbox_store(db).find_live_sandbox(id)); }},
      {"list", [&] { return ids(sandbox_store(db).list_sandboxes(org, page("", {}, ""))); }},
      {"list from a cursor", [&] { return ids(sandbox_store(db).list_sandboxes(org, page("", {}, cursor))); }},
      {"list by state", [&] { return ids(sandbox_store(db).list_sandboxes(org, page("started", {}, ""))); }},
      {"list by label", [&] { return ids(sandbox_store(db).list_sandboxes(org, page("", labels, ""))); }},
      {"list by label from a cursor",
       [&] { return ids(sandbox_store(db).list_sandboxes(org, page("", labels, cursor))); }},
      {"live sandboxes of all organizations",
       [&] {
         auto all = sandbox_store(db).list_live_sandboxes_all_orgs();
         return all ? std::to_string(all->size()) : "error";
       }},
  };

  std::string out = "{\"plans\": [";
  for (std::size_t i = 0; i < plans->size(); ++i) {
    const auto& p = (*plans)[i];
    bool history = false;
    std::string steps;
    for (const auto& s : p.steps) {
      history = history || testing::reads_history(s);
      steps += (steps.empty() ? "" : ", ") + quoted(s);
    }
    out += std::string(i ? ", " : "") + "{\"name\": " + quoted(p.name) + ", \"steps\": [" + steps +
           "], \"reads_history\": " + (history ? "true" : "false") + "}";
  }
  out += "], \"calls\": [";
  for (std::size_t i = 0; i < calls.size(); ++i) {
    calls[i].second();  // compiles the statements: the second run is the request's cost
    const auto before = db.stats().vm_steps;
    std::string result = calls[i].second();
    out += std::string(i ? ", " : "") + "{\"name\": " + quoted(calls[i].first) +
           ", \"vm_steps\": " + std::to_string(db.stats().vm_steps - before) + ", \"result\": " + quoted(result) + "}";
  }
  std::printf("%s]}\n", out.c_str());
  return 0;
}
