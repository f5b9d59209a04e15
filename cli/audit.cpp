// `sandfort audit …`: an organization's audit log through the API, and `audit verify`, which
// recomputes the chain here with the daemon's own verifier (sandfort_audit) against a public key
// the auditor pinned: checking it needs neither the database nor trust in the server.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "api_client.hpp"
#include "commands.hpp"
#include "failure.hpp"
#include "sandfort/audit/chain.hpp"
#include "sandfort/audit/checkpoint_file.hpp"
#include "sandfort/audit/verifier.hpp"

namespace sandfort::cli {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int exit_intact = 0, exit_broken = 1, exit_unverifiable = 2;
constexpr std::int64_t no_cursor = std::numeric_limits<std::int64_t>::min();

using query_params = std::vector<std::pair<std::string, std::string>>;
using checkpoints = std::vector<audit::checkpoint_record>;

// path?key=value&… without the empty values.
std::string with_query(std::string path, const query_params& params) {
  char separator = '?';
  for (const auto& [key, value] : params) {
    if (value.empty()) continue;
    path += separator + key + "=" + url_encode(value);
    separator = '&';
  }
  return path;
}

query_params filter_params(const audit_filter_options& f) {
  return {{"org", f.org},       {"since_seq", f.since_seq ? std::to_string(*f.since_seq) : ""},
          {"since", f.since},   {"until", f.until},
          {"actor", f.actor},   {"action", f.action},
          {"target", f.target}};
}

// The seq a cursor from the server names. It must move past the previous one: a server that
// sent the same cursor again would keep the paging going for ever.
std::int64_t next_seq(const std::string& cursor, std::int64_t previous) {
  std::int64_t seq = 0;
  const char* end = cursor.data() + cursor.size();
  auto [stop, ec] = std::from_chars(cursor.data(), end, seq);
  if (ec != std::errc() || stop != end || seq <= previous)
    throw failure("the server sent the cursor \"" + cursor + "\", which does not move past the previous page");
  return seq;
}

std::string string_field(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

std::string event_cell(const json& v) {
  if (v.is_string()) return v.get<std::string>();
  return v.dump(-1, ' ', false, json::error_handler_t::replace);
}

void print_events(const json& items) {
  std::vector<std::vector<std::string>> rows = {{"SEQ", "TS", "ACTOR", "ACTION", "TARGET", "OUTCOME", "DETAILS"}};
  for (const auto& e : items) {
    std::vector<std::string> row;
    for (const char* key : {"seq", "ts", "actor", "action", "target", "outcome", "details"})
      row.push_back(e.contains(key) ? event_cell(e[key]) : "-");
    if (row[4].empty()) row[4] = "-";
    rows.push_back(std::move(row));
  }
  print_table(rows);
}

// Receives a JSON Lines export: each response's body piece by piece as it arrives, then
// response_done(), which returns false to ask for no further response.
struct export_sink {
  std::function<void(std::string_view)> piece;
  std::function<bool()> response_done;
};

// Every event matching f as JSON Lines, response after response as X-Next-Cursor says.
void stream_export(api_client& client, audit_filter_options f, int page_size, const export_sink& sink) {
  std::int64_t after = f.since_seq.value_or(no_cursor);
  for (;;) {
    query_params params = filter_params(f);
    params.emplace_back("format", "jsonl");
    params.emplace_back("limit", std::to_string(page_size));
    request_spec spec;
    spec.target = with_query("/v1/audit", params);
    spec.accept = "application/x-ndjson";
    spec.on_chunk = sink.piece;
    response r = client.send(spec);
    if (r.status / 100 != 2) throw_api_error(r);
    if (!sink.response_done() || r.next_cursor.empty()) return;
    after = next_seq(r.next_cursor, after);
    f.since_seq = after;
  }
}

// Cuts a byte stream into lines; a last line without its newline counts at finish().
class line_splitter {
 public:
  explicit line_splitter(std::function<void(std::string_view)> on_line) : on_line_(std::move(on_line)) {}
  void feed(std::string_view bytes) {
    pending_.append(bytes);
    std::size_t start = 0;
    for (auto nl = pending_.find('\n'); nl != std::string::npos; nl = pending_.find('\n', start)) {
      on_line_(std::string_view(pending_).substr(start, nl - start));
      start = nl + 1;
    }
    pending_.erase(0, start);
  }
  void finish() {
    if (!pending_.empty()) on_line_(pending_);
    pending_.clear();
  }

 private:
  std::function<void(std::string_view)> on_line_;
  std::string pending_;
};

// --- verify -------------------------------------------------------------------------------------

struct org_ref {
  std::string id;
  std::string name;  // empty when the server no longer lists it (deleted)
};

audit::public_key pinned_key(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw failure("cannot read the pinned public key " + path + ": " + std::strerror(errno));
  std::stringstream pem;
  pem << in.rdbuf();
  auto pk = audit::public_key::from_pem(pem.str());
  if (!pk) throw failure(path + ": " + pk.err().message);
  return std::move(*pk);
}

// The organization by id: the verifier holds every event and checkpoint to it, so a server that
// answers with another organization's chain is caught.
org_ref resolve_org(api_client& client, const std::string& wanted) {
  json who = client.call(verb::get, "/v1/whoami");
  org_ref own{string_field(who, "org_id"), string_field(who, "org")};
  if (own.id.empty()) throw failure("GET /v1/whoami named no organization");
  if (wanted.empty() || wanted == own.id || wanted == own.name) return own;
  json orgs = client.call(verb::get, "/v1/orgs");
  if (orgs.is_object() && orgs.contains("items") && orgs["items"].is_array())
    for (const auto& o : orgs["items"])
      if (string_field(o, "id") == wanted || string_field(o, "name") == wanted)
        return {string_field(o, "id"), string_field(o, "name")};
  // A deleted organization is no longer listed, but its chain stays readable by id.
  if (wanted.starts_with("org-")) return {wanted, ""};
  throw failure("no organization " + wanted + " is visible to these credentials (name a deleted one by its id)");
}

checkpoints server_checkpoints(api_client& client, const std::string& org) {
  checkpoints out;
  std::string cursor;
  std::int64_t after = no_cursor;
  for (;;) {
    json page = client.call(verb::get, with_query("/v1/audit/checkpoints", {{"org", org}, {"limit", "1000"}, {"cursor", cursor}}));
    if (!page.is_object() || !page.contains("items") || !page["items"].is_array())
      throw failure("GET /v1/audit/checkpoints answered without items");
    for (const auto& item : page["items"]) {
      auto c = audit::checkpoint_from_json(item);
      if (!c) throw failure("the server sent a malformed checkpoint: " + c.err().message);
      out.push_back(std::move(*c));
    }
    if (!page.contains("next_cursor") || !page["next_cursor"].is_string()) return out;
    cursor = page["next_cursor"].get<std::string>();
    after = next_seq(cursor, after);
  }
}

// Adds the file's checkpoints of org that the server did not send, as sandfortd audit-verify
// adds the export's to the database's: one the server lost or deleted still binds the chain.
std::size_t add_file_checkpoints(checkpoints& all, const checkpoints& from_file, const std::string& org) {
  const auto same = [](const audit::checkpoint_record& a, const audit::checkpoint_record& b) {
    return a.org_id == b.org_id && a.seq == b.seq && a.head_hash == b.head_hash && a.ts == b.ts &&
           a.key_id == b.key_id && a.signature == b.signature;
  };
  const auto from_server = static_cast<std::ptrdiff_t>(all.size());
  std::size_t added = 0;
  for (const auto& c : from_file) {
    if (c.org_id != org) continue;
    if (std::none_of(all.begin(), all.begin() + from_server, [&](const auto& s) { return same(s, c); })) {
      all.push_back(c);
      ++added;
    }
  }
  return added;
}

// The stored event an export line stands for: the inverse of event_json (src/api/audit_routes.cpp).
// Sealed details are stored in canonical form, which the API shows as an object; details the
// daemon could not parse (an edited row) it shows as the stored text itself, a string.
audit::event_record event_from_json(const json& j) {
  if (!j.is_object()) throw failure("the server's export holds a line that is not an event");
  audit::event_record e;
  for (auto [key, field] : {std::pair{"org_id", &e.org_id}, std::pair{"ts", &e.ts}, std::pair{"actor", &e.actor},
                            std::pair{"action", &e.action}, std::pair{"target", &e.target},
                            std::pair{"outcome", &e.outcome}, std::pair{"request_id", &e.request_id},
                            std::pair{"source", &e.source}, std::pair{"prev_hash", &e.prev_hash},
                            std::pair{"hash", &e.hash}}) {
    auto it = j.find(key);
    if (it == j.end() || !it->is_string())
      throw failure(std::string("an event from the server has no string field '") + key + "'");
    *field = it->get<std::string>();
  }
  auto seq = j.find("seq");
  auto details = j.find("details");
  if (seq == j.end() || !seq->is_number_integer() || details == j.end())
    throw failure("an event from the server lacks an integer seq or details");
  e.seq = seq->get<std::int64_t>();
  if (details->is_string()) {
    e.details = details->get<std::string>();
  } else {
    // Without a canonical form (a float, say) the verifier reports the event as edited.
    std::string text = details->dump();
    auto canonical = audit::canonical_details(text);
    e.details = canonical ? std::move(*canonical) : std::move(text);
  }
  return e;
}

// Streams the organization's chain from the server into the verifier line by line as it arrives;
// once the chain is broken, nothing more is asked for.
void feed_events(api_client& client, const std::string& org, int page_size, audit::chain_verifier& verifier) {
  bool intact = true;
  line_splitter lines([&](std::string_view line) {
    if (!intact || line.find_first_not_of(" \t\r") == std::string_view::npos) return;
    auto j = json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) throw failure("the server's export holds a line that is not JSON");
    intact = verifier.feed(event_from_json(j));
  });
  audit_filter_options all;
  all.org = org;
  stream_export(client, all, page_size,
                {[&](std::string_view piece) { lines.feed(piece); },
                 [&] {
                   lines.finish();
                   return intact;
                 }});
}

struct verification {
  org_ref org;
  audit::verify_report report;
  std::int64_t latest_checkpoint_seq = -1;  // -1: none
  std::size_t only_in_file = 0;
  std::string key_id;
};

void print_verification(const verification& v, const audit_verify_options& o) {
  const auto& r = v.report;
  const std::int64_t after_latest = r.ok && r.events > v.latest_checkpoint_seq
                                        ? r.events - std::max<std::int64_t>(v.latest_checkpoint_seq, 0)
                                        : 0;
  if (o.json) {
    json j = {{"ok", r.ok},
              {"org_id", v.org.id},
              {"org", v.org.name.empty() ? json(nullptr) : json(v.org.name)},
              {"events", r.events},
              {"checkpoints", r.checkpoints},
              {"checkpoints_only_in_file", v.only_in_file},
              {"latest_checkpoint_seq", v.latest_checkpoint_seq < 0 ? json(nullptr) : json(v.latest_checkpoint_seq)},
              {"after_latest_checkpoint", after_latest},
              {"head_hash", r.head_hash},
              {"key_id", v.key_id}};
    if (!r.ok) {
      j["first_bad_seq"] = r.first_bad_seq;
      j["reason"] = r.reason;
    }
    std::cout << j.dump(2) << "\n";
  } else {
    // The line sandfortd audit-verify prints, so that one script reads both.
    const std::string who = v.org.name.empty() ? v.org.id : v.org.id + " (" + v.org.name + ")";
    if (!r.ok) {
      std::cout << who << " BROKEN at seq " << r.first_bad_seq << ": " << r.reason << "\n";
    } else {
      std::cout << who << " ok: " << r.events << " events, " << r.checkpoints << " checkpoints";
      if (after_latest > 0) std::cout << " (" << after_latest << " after the latest checkpoint)";
      std::cout << "\nhead_hash: " << r.head_hash << "\n";
    }
  }
  if (v.only_in_file > 0)
    std::cerr << "note: " << v.only_in_file << " checkpoint(s) of " << o.checkpoints_file
              << " are not on the server (lost, or deleted there)\n";
  if (r.ok && r.checkpoints == 0 && r.events > 0)
    std::cerr << "note: no signed checkpoint covers this chain: it is consistent, but nothing shows that it was not "
                 "rewritten whole\n";
}

int verify(const audit_verify_options& o) {
  const audit::public_key pk = pinned_key(o.public_key_file);
  checkpoints from_file;
  if (!o.checkpoints_file.empty()) {
    auto read = audit::read_checkpoint_file(o.checkpoints_file);
    if (!read) throw failure(read.err().message);
    from_file = std::move(*read);
  }
  api_client client = connect_api();
  verification v;
  v.org = resolve_org(client, o.org);
  v.key_id = pk.key_id();
  checkpoints all = server_checkpoints(client, v.org.id);
  v.only_in_file = add_file_checkpoints(all, from_file, v.org.id);
  for (const auto& c : all) v.latest_checkpoint_seq = std::max(v.latest_checkpoint_seq, c.seq);
  // Told the checkpoints first, the verifier keeps only their seqs' hashes: memory stays small.
  audit::chain_verifier verifier(v.org.id, all);
  feed_events(client, v.org.id, o.page_size, verifier);
  v.report = verifier.finish(all, pk);
  print_verification(v, o);
  return v.report.ok ? exit_intact : exit_broken;
}

// Writes an export into path.partial, renamed over path once complete, so that an interrupted
// export never looks like a finished one. Events are not for everyone's eyes: mode 0600.
class export_file {
 public:
  explicit export_file(std::string path) : path_(std::move(path)), partial_(path_ + ".partial") {
    out_.open(partial_, std::ios::binary | std::ios::trunc);
    if (!out_) throw failure("cannot write " + partial_ + ": " + std::strerror(errno));
    std::error_code ec;
    fs::permissions(partial_, fs::perms::owner_read | fs::perms::owner_write, ec);
  }
  ~export_file() {
    if (done_) return;
    out_.close();
    std::error_code ec;
    fs::remove(partial_, ec);
  }
  export_file(const export_file&) = delete;
  export_file& operator=(const export_file&) = delete;

  std::ostream& stream() { return out_; }
  void commit() {
    out_.close();
    if (out_.fail()) throw failure("writing " + partial_ + " failed");
    std::error_code ec;
    fs::rename(partial_, path_, ec);
    if (ec) throw failure("cannot rename " + partial_ + " to " + path_ + ": " + ec.message());
    done_ = true;
  }

 private:
  std::string path_, partial_;
  std::ofstream out_;
  bool done_ = false;
};

}  // namespace

int cmd_audit_list(const audit_list_options& o) {
  api_client client = connect_api();
  audit_filter_options f = o.filter;
  const std::string limit = o.limit ? std::to_string(*o.limit) : o.all ? "1000" : "";
  json items = json::array();
  json next = nullptr;
  for (;;) {
    query_params params = filter_params(f);
    params.emplace_back("limit", limit);
    json page = client.call(verb::get, with_query("/v1/audit", params));
    if (!page.is_object() || !page.contains("items") || !page["items"].is_array())
      throw failure("GET /v1/audit answered without items");
    for (auto& e : page["items"]) items.push_back(std::move(e));
    next = page.contains("next_cursor") ? page["next_cursor"] : json(nullptr);
    if (!o.all || !next.is_string()) break;
    f.since_seq = next_seq(next.get<std::string>(), f.since_seq.value_or(no_cursor));
  }
  if (o.json) {
    std::cout << json{{"items", items}, {"next_cursor", next}}.dump(2) << "\n";
    return 0;
  }
  print_events(items);
  if (next.is_string())
    std::cerr << "more events: --since-seq " << next.get<std::string>() << " for the next page, or --all\n";
  return 0;
}

int cmd_audit_export(const audit_filter_options& o, const std::string& out_file, int page_size) {
  api_client client = connect_api();
  std::optional<export_file> file;
  if (!out_file.empty() && out_file != "-") file.emplace(out_file);
  std::ostream& out = file ? file->stream() : std::cout;
  std::int64_t events = 0;
  stream_export(client, o, page_size,
                {[&](std::string_view piece) {
                   out.write(piece.data(), static_cast<std::streamsize>(piece.size()));
                   events += std::count(piece.begin(), piece.end(), '\n');
                 },
                 [&] { return true; }});
  out.flush();
  if (!out) throw failure("writing the export failed");
  if (file) {
    file->commit();
    std::cerr << events << " events written to " << out_file << "\n";
  }
  return 0;
}

int cmd_audit_public_key(const std::string& out_file, bool force, bool as_json) {
  api_client client = connect_api();
  json key = client.call(verb::get, "/v1/audit/public-key");
  const std::string pem = string_field(key, "public_key_pem");
  auto pk = audit::public_key::from_pem(pem);
  if (!pk) throw failure("the server's audit public key is unusable: " + pk.err().message);
  if (string_field(key, "key_id") != pk->key_id())
    throw failure("the server says key_id " + string_field(key, "key_id") + " but its key's id is " + pk->key_id());
  if (!out_file.empty() && out_file != "-") {
    // "x": never replace a pinned key by accident.
    std::FILE* f = std::fopen(out_file.c_str(), force ? "w" : "wx");
    if (!f)
      throw failure("cannot write " + out_file + ": " + std::strerror(errno) +
                    (errno == EEXIST ? " (a pinned key is not replaced without --force)" : ""));
    const bool written = std::fwrite(pem.data(), 1, pem.size(), f) == pem.size();
    if (std::fclose(f) != 0 || !written) throw failure("writing " + out_file + " failed");
    std::cerr << "saved the key " << pk->key_id() << " in " << out_file
              << "; before trusting it, compare its id with the one sandfortd logs at start "
                 "(\"audit: checkpoints signed with key ...\")\n";
  } else if (!as_json) {
    std::cout << pem << (pem.ends_with('\n') ? "" : "\n");
  }
  if (as_json) std::cout << key.dump(2) << "\n";
  return 0;
}

int cmd_audit_checkpoint(const std::string& org, bool as_json) {
  api_client client = connect_api();
  request_spec spec;
  spec.method = verb::post;
  spec.target = with_query("/v1/audit/checkpoints", {{"org", org}});
  response r = client.send(spec);
  if (r.status / 100 != 2) throw_api_error(r);
  json c = json::parse(r.body, nullptr, false);
  if (!c.is_object()) throw failure("POST /v1/audit/checkpoints answered something that is not JSON");
  if (as_json) {
    std::cout << c.dump(2) << "\n";
    return 0;
  }
  std::cout << (r.status == 201 ? "signed" : "unchanged (the head has not moved since)") << ": "
            << string_field(c, "org_id") << " at seq " << event_cell(c.value("seq", json(nullptr))) << "\n"
            << "head_hash: " << string_field(c, "head_hash") << "\n"
            << "key_id: " << string_field(c, "key_id") << "\n"
            << "ts: " << string_field(c, "ts") << "\n";
  return 0;
}

// The auditor's copy of the checkpoints, kept away from the server: a checkpoint it holds binds the
// chain up to its seq even after the server lost it or rewrote its own. Lines already in the file
// are never rewritten; the server's checkpoints it lacks are appended one line each (the form and
// the O_APPEND + fsync of the daemon's audit.export_path). A kept seq the server now shows signed
// over another head is evidence of a rewrite: reported, kept as it was, exit 1.
int cmd_audit_checkpoints(const std::string& org, const std::string& out_file) {
  checkpoints kept;
  const bool to_file = !out_file.empty() && out_file != "-";
  if (to_file && fs::exists(out_file)) {
    auto read = audit::read_checkpoint_file(out_file);
    if (!read) throw failure(read.err().message);
    kept = std::move(*read);
  }
  api_client client = connect_api();
  const std::string org_id = resolve_org(client, org).id;
  std::size_t added = 0, already = 0, differing = 0;
  for (const auto& c : server_checkpoints(client, org_id)) {
    if (!to_file) {
      std::cout << audit::checkpoint_json(c).dump() << "\n";
      continue;
    }
    auto same_seq = std::find_if(kept.begin(), kept.end(),
                                 [&](const auto& k) { return k.org_id == c.org_id && k.seq == c.seq; });
    if (same_seq == kept.end()) {
      if (auto appended = audit::export_checkpoint(out_file, c); !appended) throw failure(appended.err().message);
      kept.push_back(c);
      ++added;
    } else if (same_seq->head_hash == c.head_hash && same_seq->signature == c.signature &&
               same_seq->ts == c.ts && same_seq->key_id == c.key_id) {
      ++already;
    } else {
      ++differing;
      std::cerr << "sandfort: the server's checkpoint at seq " << c.seq << " of " << c.org_id
                << " differs from the one kept in " << out_file << " (head " << c.head_hash << ", kept "
                << same_seq->head_hash << "): the kept one stays; run `sandfort audit verify --checkpoints "
                << out_file << "`\n";
    }
  }
  if (to_file && !fs::exists(out_file)) {
    // None signed yet: the file exists all the same, so that `verify --checkpoints` reads it.
    const int fd = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) throw failure("cannot create " + out_file + ": " + std::strerror(errno));
    ::close(fd);
  }
  if (to_file)
    std::cerr << added << " new checkpoint(s) of " << org_id << " appended to " << out_file << " (" << already
              << " already there)\n";
  return differing == 0 ? 0 : 1;
}

// A broken chain is exit 1 and nothing else is: whatever stops the verification from finishing
// (the key file, the network, the API, a malformed answer) is exit 2.
int cmd_audit_verify(const audit_verify_options& o) {
  try {
    return verify(o);
  } catch (const failure& e) {
    throw failure(e.what(), exit_unverifiable);
  } catch (const std::exception& e) {
    throw failure(std::string("audit verify: ") + e.what(), exit_unverifiable);
  }
}

}  // namespace sandfort::cli
