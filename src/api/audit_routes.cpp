// The audit log: an organization's events, their verification, the signed checkpoints and the
// public key that checks them (docs/audit.md).
#include <limits>

#include "json_body.hpp"
#include "routes.hpp"
#include "sandfort/audit/checkpoint_file.hpp"
#include "sandfort/audit/verifier.hpp"

namespace sandfort::api {

using nlohmann::json;
using boost::asio::awaitable;

namespace {

constexpr std::int64_t page_default = 100, page_max = 1000;
constexpr std::int64_t export_default = 1000, export_max = 100000;
// An export is built in memory from pages: at most export_max events and about this many bytes.
constexpr std::size_t export_max_bytes = std::size_t{64} << 20;

// The organization whose chain a request reads: the one `?org=` names (resolve_target_org). A
// deleted organization's chain may still be read by the superadmin: the record outlives it.
result<std::string> chain_org(dependencies& deps, const http::context& ctx, const auth::principal& p) {
  auto it = ctx.query.find("org");
  return resolve_target_org(deps, p, it == ctx.query.end() ? std::string() : it->second, deleted_orgs::allowed);
}

bool digits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

// RFC 3339 in UTC ("2025-01-02T03:04:05Z", any fraction) in the stored form, milliseconds
// always written, so that bounds compare as text with the stored times.
result<std::string> query_time(const http::context& ctx, const char* key) {
  auto it = ctx.query.find(key);
  if (it == ctx.query.end() || it->second.empty()) return std::string();
  const std::string& s = it->second;
  const auto bad = [&] {
    return make_error(errc::invalid_argument,
                      std::string("query parameter '") + key + "' must be a UTC time like 2025-01-02T03:04:05Z");
  };
  constexpr std::string_view shape = "dddd-dd-ddTdd:dd:dd";
  if (s.size() < shape.size() + 1 || s.back() != 'Z') return bad();
  for (std::size_t i = 0; i < shape.size(); ++i)
    if (shape[i] == 'd' ? !digits(s.substr(i, 1)) : s[i] != shape[i]) return bad();
  const std::string_view rest(s.data() + shape.size(), s.size() - shape.size() - 1);  // ".123" or ""
  if (!rest.empty() && (rest[0] != '.' || !digits(rest.substr(1)))) return bad();
  std::string fraction = rest.empty() ? "" : std::string(rest.substr(1));
  fraction.resize(3, '0');
  std::string out = s.substr(0, shape.size()) + "." + fraction + "Z";
  time_point parsed;
  if (!parse_time(out, parsed)) return bad();
  return out;
}

// limit within [1, max], default when absent.
result<std::int64_t> query_limit(const http::context& ctx, std::int64_t fallback, std::int64_t max) {
  auto limit = query_int(ctx, "limit");
  if (!limit) return std::move(limit).err();
  if (!*limit) return fallback;
  if (**limit < 1 || **limit > max)
    return make_error(errc::invalid_argument, "limit must be 1-" + std::to_string(max));
  return **limit;
}

// `?cursor=` (what next_cursor said) or `?since_seq=`: a seq; everything after it.
result<std::int64_t> query_after(const http::context& ctx, const char* name) {
  for (const char* key : {"cursor", name}) {
    auto v = query_int(ctx, key);
    if (!v) return std::move(v).err();
    if (*v) return **v;
  }
  return 0;
}

result<store::audit_filter> parse_filter(const http::context& ctx) {
  store::audit_filter f;
  auto after = query_after(ctx, "since_seq");
  if (!after) return std::move(after).err();
  f.after_seq = *after;
  auto since = query_time(ctx, "since");
  if (!since) return std::move(since).err();
  auto until = query_time(ctx, "until");
  if (!until) return std::move(until).err();
  f.since_ts = std::move(*since);
  f.until_ts = std::move(*until);
  for (auto [key, field] : {std::pair{"actor", &f.actor}, std::pair{"action", &f.action}, std::pair{"target", &f.target}})
    if (auto it = ctx.query.find(key); it != ctx.query.end()) *field = it->second;
  return f;
}

json event_json(const audit::event_record& e) {
  auto details = json::parse(e.details, nullptr, /*allow_exceptions=*/false);
  return {{"org_id", e.org_id},
          {"seq", e.seq},
          {"ts", e.ts},
          {"actor", e.actor},
          {"action", e.action},
          {"target", e.target},
          {"outcome", e.outcome},
          {"request_id", e.request_id},
          {"source", e.source},
          // Stored details that are not JSON (an edited row) are shown as they are, as a string.
          {"details", details.is_discarded() ? json(e.details) : details},
          {"prev_hash", e.prev_hash},
          {"hash", e.hash}};
}

bool wants_jsonl(const http::context& ctx) {
  if (auto it = ctx.query.find("format"); it != ctx.query.end()) return it->second == "jsonl";
  auto accept = ctx.req.find(http::bhttp::field::accept);
  if (accept == ctx.req.end()) return false;
  const std::string_view value = accept->value();
  return value.find("application/x-ndjson") != std::string_view::npos ||
         value.find("application/jsonl") != std::string_view::npos;
}

result<void> check_format(const http::context& ctx) {
  auto it = ctx.query.find("format");
  if (it == ctx.query.end() || it->second == "json" || it->second == "jsonl") return {};
  return make_error(errc::invalid_argument, "format must be json or jsonl");
}

// JSON Lines, page by page: {"body", "next_cursor"}, the cursor set when more events match than
// were sent. Runs apart from the I/O thread (a long read).
result<json> export_jsonl(audit_reader& chain, const std::string& org, store::audit_filter f, std::int64_t limit) {
  // A page with a time bound reads its whole window (audit_store.hpp): fewer, larger pages then.
  const std::size_t page = f.since_ts.empty() && f.until_ts.empty() ? 1000 : 10000;
  std::string body;
  auto remaining = static_cast<std::size_t>(limit);
  bool more = false;
  while (remaining > 0) {
    f.limit = std::min(page, remaining) + 1;  // one beyond: is there more?
    auto events = chain.events(org, f);
    if (!events) return std::move(events).err();
    more = events->size() == f.limit;
    if (more) events->pop_back();
    for (const auto& e : *events) {
      body += event_json(e).dump(-1, ' ', false, json::error_handler_t::replace);
      body += '\n';
      f.after_seq = e.seq;
    }
    remaining -= events->size();
    if (!more || body.size() >= export_max_bytes) break;
  }
  json out = {{"next_cursor", more ? json(std::to_string(f.after_seq)) : json(nullptr)}};
  out["body"] = std::move(body);
  return out;
}

http::response jsonl_response(json& exported) {
  http::response res{http::bhttp::status::ok, 11};
  res.set(http::bhttp::field::content_type, "application/x-ndjson");
  if (exported["next_cursor"].is_string()) res.set("X-Next-Cursor", exported["next_cursor"].get<std::string>());
  res.body() = std::move(exported["body"].get_ref<std::string&>());
  res.prepare_payload();
  return res;
}

awaitable<result<http::response>> list_events(dependencies& deps, const http::context& ctx,
                                              const auth::principal& p) {
  auto org = chain_org(deps, ctx, p);
  if (!org) co_return std::move(org).err();
  if (auto r = check_format(ctx); !r) co_return std::move(r).err();
  auto f = parse_filter(ctx);
  if (!f) co_return std::move(f).err();
  const bool jsonl = wants_jsonl(ctx);
  auto limit = jsonl ? query_limit(ctx, export_default, export_max) : query_limit(ctx, page_default, page_max);
  if (!limit) co_return std::move(limit).err();
  if (jsonl) {
    // Named: GCC 12 mishandles temporaries inside co_await expressions.
    auto read = [org = *org, f = std::move(*f), limit = *limit](audit_reader& chain) {
      return export_jsonl(chain, org, f, limit);
    };
    auto exported = co_await deps.audit.read_apart(std::move(read));
    if (!exported) co_return std::move(exported).err();
    co_return jsonl_response(*exported);
  }

  f->limit = static_cast<std::size_t>(*limit) + 1;
  auto events = deps.audit.events(*org, *f);
  if (!events) co_return std::move(events).err();
  const bool more = events->size() == f->limit;
  if (more) events->pop_back();
  json items = json::array();
  for (const auto& e : *events) items.push_back(event_json(e));
  json next = more ? json(std::to_string(events->back().seq)) : json(nullptr);
  co_return http::json_response(200, {{"items", std::move(items)}, {"next_cursor", std::move(next)}});
}

// Every checkpoint of org, in pages (a year of 5-minute checkpoints is about 105,000).
result<std::vector<audit::checkpoint_record>> all_checkpoints(audit_reader& chain, const std::string& org) {
  std::vector<audit::checkpoint_record> out;
  for (std::int64_t after = std::numeric_limits<std::int64_t>::min();;) {
    auto page = chain.checkpoints(org, after, 10000);
    if (!page) return std::move(page).err();
    if (page->empty()) return out;
    after = page->back().seq;
    out.insert(out.end(), page->begin(), page->end());
  }
}

// Runs apart from the I/O thread (a long read): the chain recomputed against the daemon's key.
result<json> verify_chain(audit_reader& chain, const std::string& public_key_pem, const std::string& org) {
  auto pk = audit::public_key::from_pem(public_key_pem);
  if (!pk) return std::move(pk).err();
  auto checkpoints = all_checkpoints(chain, org);
  if (!checkpoints) return std::move(checkpoints).err();
  audit::chain_verifier verifier(org, *checkpoints);
  // From the lowest seq there is, so that a row with an impossible seq is seen too.
  auto scanned = chain.scan_events(
      org, std::numeric_limits<std::int64_t>::min(), [&](const audit::event_record& e) { return verifier.feed(e); });
  if (!scanned) return std::move(scanned).err();
  const auto r = verifier.finish(*checkpoints, *pk);
  json j = {{"ok", r.ok},
            {"org_id", org},
            {"events", r.events},
            {"checkpoints", r.checkpoints},
            {"latest_checkpoint_seq", checkpoints->empty() ? json(nullptr) : json(checkpoints->back().seq)},
            {"head_hash", r.head_hash}};
  if (!r.ok) {
    j["first_bad_seq"] = r.first_bad_seq;
    j["reason"] = r.reason;
  }
  return j;
}

awaitable<result<http::response>> verify(dependencies& deps, const http::context& ctx, const auth::principal& p) {
  auto org = chain_org(deps, ctx, p);
  if (!org) co_return std::move(org).err();
  auto read = [org = *org, pem = deps.audit_key.public_key_pem()](audit_reader& chain) {
    return verify_chain(chain, pem, org);
  };
  auto report = co_await deps.audit.read_apart(std::move(read));
  if (!report) co_return std::move(report).err();
  co_return http::json_response(200, *report);
}

awaitable<result<http::response>> list_checkpoints(dependencies& deps, const http::context& ctx,
                                                   const auth::principal& p) {
  auto org = chain_org(deps, ctx, p);
  if (!org) co_return std::move(org).err();
  auto limit = query_limit(ctx, page_default, page_max);
  if (!limit) co_return std::move(limit).err();
  auto after = query_int(ctx, "cursor");
  if (after && !*after) after = query_int(ctx, "after_seq");
  if (!after) co_return std::move(after).err();
  // Absent: from the very first, a checkpoint of the empty chain (seq 0) included.
  auto page = deps.audit.checkpoints(*org, after->value_or(-1), static_cast<std::size_t>(*limit) + 1);
  if (!page) co_return std::move(page).err();
  const bool more = page->size() > static_cast<std::size_t>(*limit);
  if (more) page->pop_back();
  json items = json::array();
  for (const auto& c : *page) items.push_back(audit::checkpoint_json(c));
  json next = more ? json(std::to_string(page->back().seq)) : json(nullptr);
  co_return http::json_response(200, {{"items", std::move(items)}, {"next_cursor", std::move(next)}});
}

// 201 with a new checkpoint; 200 with the latest when the head has not moved since.
awaitable<result<http::response>> checkpoint_now(dependencies& deps, const http::context& ctx,
                                                 const auth::principal& p) {
  auto org = chain_org(deps, ctx, p);
  if (!org) co_return std::move(org).err();
  auto c = co_await deps.audit.checkpoint_now(*org);
  if (!c) co_return std::move(c).err();
  co_return http::json_response(c->made ? 201 : 200, audit::checkpoint_json(c->checkpoint));
}

// Runs one of the functions above and turns its error into the API's error response.
template <typename F>
buffered_handler answer(F f) {
  return [f](dependencies& deps, http::context& ctx, const auth::principal& p) -> awaitable<http::response> {
    auto res = co_await f(deps, ctx, p);
    if (!res) co_return http::error_response(res.err(), ctx.request_id);
    co_return std::move(*res);
  };
}

}  // namespace

std::vector<api_route> audit_routes() {
  using auth::permission;
  return {
      {http::verb::get, "/v1/audit", permission::manage_org, answer(list_events)},
      {http::verb::get, "/v1/audit/verify", permission::manage_org, answer(verify)},
      {http::verb::get, "/v1/audit/checkpoints", permission::manage_org, answer(list_checkpoints)},
      {http::verb::post, "/v1/audit/checkpoints", permission::manage_org, answer(checkpoint_now)},
      // Public information: any role may fetch it to pin it.
      {http::verb::get, "/v1/audit/public-key", permission::read,
       answer([](dependencies& d, const http::context&, const auth::principal&) -> awaitable<result<http::response>> {
         co_return http::json_response(200, {{"key_id", d.audit_key.key_id()},
                                          {"algorithm", "Ed25519"},
                                          {"public_key_pem", d.audit_key.public_key_pem()}});
       })},
  };
}

}  // namespace sandfort::api
