// The audit chain's rows: events and checkpoints, stored exactly as given.
#include <algorithm>

#include "sandfort/store/audit_store.hpp"
#include "statement.hpp"

namespace sandfort::store {

using detail::query;
using detail::sql;
using detail::statement;

namespace {

// Columns in the order read_audit_event expects.
constexpr const char* audit_event_columns =
    "org_id, seq, ts, actor, action, target, outcome, request_id, source, details, prev_hash, hash";

audit::event_record read_audit_event(const statement& st) {
  audit::event_record e;
  e.org_id = st.column_text(0);
  e.seq = st.column_int64(1);
  e.ts = st.column_text(2);
  e.actor = st.column_text(3);
  e.action = st.column_text(4);
  e.target = st.column_text(5);
  e.outcome = st.column_text(6);
  e.request_id = st.column_text(7);
  e.source = st.column_text(8);
  e.details = st.column_text(9);
  e.prev_hash = st.column_text(10);
  e.hash = st.column_text(11);
  return e;
}

constexpr const char* checkpoint_columns = "org_id, seq, head_hash, ts, key_id, signature";

audit::checkpoint_record read_checkpoint(const statement& st) {
  return audit::checkpoint_record{st.column_text(0), st.column_int64(1), st.column_text(2),
                                  st.column_text(3), st.column_text(4),  st.column_text(5)};
}

// Named rather than left to the planner, so that a page never reads more than audit_filter
// promises (without statistics the planner may prefer an equality index over the time range);
// a test checks every plan.
const char* audit_index_for(const audit_filter& f) {
  if (f.lifecycle_only) return " INDEXED BY audit_lifecycle";
  if (!f.since_ts.empty() || !f.until_ts.empty()) return " INDEXED BY audit_by_ts";
  if (!f.target.empty()) return " INDEXED BY audit_by_target";
  if (!f.actor.empty()) return " INDEXED BY audit_by_actor";
  if (!f.action.empty()) return " INDEXED BY audit_by_action";
  return "";  // the primary key: org_id, seq
}

// The actions audit_lifecycle's WHERE names (src/store/migrations.cpp), in its order, and the
// prefix of those it matches by GLOB.
constexpr std::string_view lifecycle_listed[] = {
    "sandbox.create", "sandbox.start",   "sandbox.stop",    "sandbox.pause",   "sandbox.resume",
    "sandbox.delete", "sandbox.state",   "snapshot.create", "snapshot.delete", "volume.create",
    "volume.delete",  "rate_limit.exceeded", "egress"};
constexpr std::string_view lifecycle_prefix = "guardrail.";

// That WHERE made from them, word for word as the migration wrote it: SQLite uses a partial
// index only for a query that contains its WHERE term as written (INDEXED BY fails otherwise,
// and the plan test reads every query).
const std::string& lifecycle_actions() {
  static const std::string term = [] {
    std::string t = "action IN (";
    for (std::string_view a : lifecycle_listed) {
      if (t.back() != '(') t += ", ";
      t += '\'';
      t += a;
      t += '\'';
    }
    t += ") OR action GLOB '";
    t += lifecycle_prefix;
    t += "*'";
    return t;
  }();
  return term;
}

}  // namespace

bool is_lifecycle_action(std::string_view action) {
  for (std::string_view a : lifecycle_listed)
    if (action == a) return true;
  return action.starts_with(lifecycle_prefix);
}

namespace {

// Only the terms of the filter's non-empty fields, so each is a range or an equality the index
// can seek on; parameters keep their numbers whether used or not.
std::string list_audit_events_sql(const audit_filter& f) {
  std::string q = sql("SELECT ", audit_event_columns, " FROM audit_events");
  q += audit_index_for(f);
  q += " WHERE org_id = ?1 AND seq > ?2";
  if (!f.since_ts.empty()) q += " AND ts >= ?3";
  if (!f.until_ts.empty()) q += " AND ts <= ?4";
  if (!f.actor.empty()) q += " AND actor = ?5";
  if (!f.action.empty()) q += " AND action = ?6";
  if (!f.target.empty()) q += " AND target = ?7";
  if (f.lifecycle_only) q += sql(" AND (", lifecycle_actions(), ")");
  q += " ORDER BY seq LIMIT ?8";
  return q;
}

constexpr const char* audit_head_sql = "SELECT seq, hash FROM audit_events WHERE org_id = ?1 ORDER BY seq DESC LIMIT 1";

// Appends the distinct org ids of `table` in order, seeking to the next one each time instead of
// reading every row. An id that does not sort after the previous one (not text: the file was
// edited) would repeat forever, so it ends the walk with an error.
result<void> append_org_ids(database& db, std::string_view table, std::vector<std::string>& out) {
  const std::string first = sql("SELECT org_id FROM ", table, " WHERE org_id >= '' ORDER BY org_id LIMIT 1");
  const std::string next = sql("SELECT org_id FROM ", table, " WHERE org_id > ?1 ORDER BY org_id LIMIT 1");
  const auto text = [](const statement& row) { return row.column_text(0); };
  std::optional<std::string> previous;
  for (;;) {
    auto id = previous ? query(db, next, *previous).first(text) : query(db, first).first(text);
    if (!id) return std::move(id).err();
    if (!*id) return {};
    if (previous && **id <= *previous)
      return make_error(errc::internal, std::string(table) + " holds an org_id that is not text");
    out.push_back(**id);
    previous = std::move(**id);
  }
}

}  // namespace

detail::named_statements detail::audit_request_paths() { return {{"audit chain head", audit_head_sql}}; }

result<audit::chain_head> audit_store::audit_head_of(const std::string& org_id) {
  auto head = query(*db_, audit_head_sql, org_id).first([](const statement& row) {
    return audit::chain_head{row.column_int64(0), row.column_text(1)};
  });
  if (!head) return std::move(head).err();
  return head->value_or(audit::chain_head{});
}

result<void> audit_store::insert_audit_event(const audit::event_record& e) {
  if (e.seq < 1)
    return make_error(errc::invalid_argument, "audit seq must be at least 1, not " + std::to_string(e.seq));
  auto r = query(*db_,
                 sql("INSERT INTO audit_events (", audit_event_columns,
                     ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)"),
                 e.org_id, e.seq, e.ts, e.actor, e.action, e.target, e.outcome, e.request_id, e.source, e.details,
                 e.prev_hash, e.hash)
               .run();
  if (!r && r.err().code == errc::conflict)
    return make_error(errc::conflict, "audit event " + std::to_string(e.seq) + " of " + e.org_id + " already exists");
  // Observers wake what delivers life-cycle events; an exec's row would wake them for nothing.
  if (r && is_lifecycle_action(e.action)) db_->note_append(e.org_id, e.seq);
  return r;
}

result<std::vector<audit::event_record>> audit_store::list_audit_events(const std::string& org_id,
                                                                        const audit_filter& f) {
  return query(*db_, list_audit_events_sql(f), org_id, f.after_seq, f.since_ts, f.until_ts, f.actor, f.action, f.target,
               f.limit)
      .rows(read_audit_event);
}

result<void> audit_store::scan_audit_events(const std::string& org_id, std::int64_t from_seq,
                                            const std::function<bool(const audit::event_record&)>& each) {
  return query(*db_,
               sql("SELECT ", audit_event_columns, " FROM audit_events WHERE org_id = ?1 AND seq >= ?2 ORDER BY seq"),
               org_id, from_seq)
      .each([&](const statement& row) { return each(read_audit_event(row)); });
}

result<std::vector<std::string>> audit_store::audit_org_ids() {
  std::vector<std::string> ids;
  if (auto r = append_org_ids(*db_, "audit_events", ids); !r) return std::move(r).err();
  if (auto r = append_org_ids(*db_, "audit_checkpoints", ids); !r) return std::move(r).err();
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

result<void> audit_store::insert_audit_checkpoint(const audit::checkpoint_record& c) {
  auto r = query(*db_, sql("INSERT INTO audit_checkpoints (", checkpoint_columns, ") VALUES (?1, ?2, ?3, ?4, ?5, ?6)"),
                 c.org_id, c.seq, c.head_hash, c.ts, c.key_id, c.signature)
               .run();
  if (!r && r.err().code == errc::conflict)
    return make_error(errc::conflict,
                      "a checkpoint at " + std::to_string(c.seq) + " of " + c.org_id + " already exists");
  return r;
}

result<std::optional<audit::checkpoint_record>> audit_store::latest_audit_checkpoint(const std::string& org_id) {
  return query(
             *db_,
             sql("SELECT ", checkpoint_columns, " FROM audit_checkpoints WHERE org_id = ?1 ORDER BY seq DESC LIMIT 1"),
             org_id)
      .first(read_checkpoint);
}

result<std::vector<audit::checkpoint_record>> audit_store::list_audit_checkpoints(const std::string& org_id,
                                                                                  std::int64_t after_seq,
                                                                                  std::size_t limit) {
  return query(*db_,
               sql("SELECT ", checkpoint_columns,
                   " FROM audit_checkpoints WHERE org_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3"),
               org_id, after_seq, limit)
      .rows(read_checkpoint);
}

}  // namespace sandfort::store
