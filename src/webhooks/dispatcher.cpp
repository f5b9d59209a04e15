#include "sandfort/webhooks/dispatcher.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>
#include <random>
#include <utility>
#include <spdlog/spdlog.h>

#include "sandfort/audit/lifecycle_events.hpp"
#include "sandfort/http/url_client.hpp"
#include "sandfort/store/audit_store.hpp"

namespace sandfort::webhooks {

namespace asio = boost::asio;
using nlohmann::json;

namespace {

constexpr std::size_t audit_page = 200;   // audit rows read at once after a cursor
constexpr int pages_per_take = 5;         // then the round goes on to the next webhook
constexpr std::size_t prune_batch = 500;  // finished rows deleted per round at most

double random_jitter() {
  static thread_local std::mt19937_64 gen{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(gen);
}

std::int64_t ms_of(const std::string& ts, std::int64_t fallback) {
  time_point t;
  if (!parse_time(ts, t)) return fallback;
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

bool wanted(const std::vector<std::string>& types, const std::string& type) {
  return types.empty() || std::find(types.begin(), types.end(), type) != types.end();
}

std::vector<std::string> types_of(const std::string& types_json) {
  auto j = json::parse(types_json, nullptr, false);
  std::vector<std::string> out;
  if (j.is_array())
    for (const auto& t : j)
      if (t.is_string()) out.push_back(t.get<std::string>());
  return out;
}

// The event of a delivery, read again from the chain by its seq (retries and restarts included:
// the chain is the only copy).
std::optional<audit::lifecycle_event> event_at(store::database& db, const std::string& org_id, std::int64_t seq) {
  store::audit_filter f;
  f.after_seq = seq - 1;
  f.limit = 1;
  auto rows = store::audit_store(db).list_audit_events(org_id, f);
  if (!rows || rows->empty() || rows->front().seq != seq) return std::nullopt;
  return audit::lifecycle_event_of(rows->front());
}

}  // namespace

std::string secret_aad(std::string_view org_id, std::string_view webhook_id) {
  std::string aad = "sandfort webhook secret";
  aad.push_back('\0');
  aad.append(org_id);
  aad.push_back('\0');
  aad.append(webhook_id);
  return aad;
}

dispatcher::dispatcher(asio::any_io_executor ex, dispatcher_options o, store::database& db,
                       const secrets::sealing_key& key, const clock& clk, std::function<double()> jitter)
    : ex_(ex),
      o_(std::move(o)),
      db_(db),
      store_(db),
      key_(key),
      clk_(clk),
      jitter_(jitter ? std::move(jitter) : std::function<double()>(random_jitter)),
      policy_(o_.allowed_ranges),
      bell_(ex) {}

std::int64_t dispatcher::now_ms() const {
  return std::chrono::duration_cast<std::chrono::milliseconds>(clk_.now().time_since_epoch()).count();
}

void dispatcher::wake() {
  woken_ = true;
  everything_ = true;
  bell_.cancel();
}

void dispatcher::wake(const std::string& org_id) {
  woken_ = true;
  appended_.insert(org_id);
  bell_.cancel();
}

void dispatcher::stop() {
  stopping_ = true;
  bell_.cancel();
}

asio::awaitable<void> dispatcher::run() {
  while (!stopping_) {
    woken_ = false;
    const bool everything = std::exchange(everything_, false);
    const auto orgs = std::exchange(appended_, {});
    auto due = round(everything ? nullptr : &orgs);
    // A partial round saw only some webhooks: the others' next retry is still the last full round's.
    if (everything)
      full_due_ = due;
    else if (full_due_ && (!due || *full_due_ < *due))
      due = full_due_;
    if (stopping_) break;
    if (woken_) continue;  // told of something while the round ran
    auto wait = o_.poll_interval;
    if (due) wait = std::min(wait, std::chrono::milliseconds(std::max<std::int64_t>(0, *due - now_ms())));
    bell_.expires_after(wait);
    auto [ec] = co_await bell_.async_wait(asio::as_tuple(asio::use_awaitable));
    // Timed out (a poll, or a retry due): every webhook. Woken: what the wake said.
    if (!ec) everything_ = true;
  }
}

std::optional<std::int64_t> dispatcher::round(const std::set<std::string>* orgs) {
  std::optional<std::int64_t> earliest;
  const auto now = now_ms();
  auto soon = [&](std::int64_t at) { earliest = earliest ? std::min(*earliest, at) : at; };
  auto hooks = store_.enabled_webhooks();
  if (!hooks) {
    spdlog::warn("webhooks: {}", hooks.err().message);
    return now + o_.poll_interval.count();
  }
  for (const auto& w : *hooks) {
    if (stopping_) break;
    if (orgs != nullptr && !orgs->contains(w.org_id)) continue;  // nothing new there; the next poll looks
    if (busy_.contains({w.org_id, w.id})) continue;  // its attempt ends with a wake
    auto head = store_.pending(w.org_id, w.id);
    if (!head) {
      spdlog::warn("webhooks: {} of {}: {}", w.id, w.org_id, head.err().message);
      continue;
    }
    if (!*head) {
      bool more = false;
      *head = take_next(w, more);
      if (more) soon(now);  // a long stretch of life-cycle rows of other types: read on next round
      if (!*head) continue;
    }
    const auto& d = **head;
    const auto at = d.next_attempt_ms.value_or(now);
    if (at > now) {
      soon(at);
      continue;
    }
    if (in_flight_ >= o_.concurrency) continue;  // an attempt's end wakes the worker
    busy_.insert({w.org_id, w.id});
    ++in_flight_;
    asio::co_spawn(ex_, attempt(w, d), asio::detached);
  }
  if (now - last_prune_ms_ >= o_.poll_interval.count()) {
    last_prune_ms_ = now;
    const auto before = now - std::chrono::duration_cast<std::chrono::milliseconds>(o_.log_retention).count();
    if (auto pruned = store_.prune_finished(before, prune_batch); !pruned)
      spdlog::warn("webhooks: pruning the delivery log: {}", pruned.err().message);
  }
  return earliest;
}

std::optional<store::webhook_delivery> dispatcher::take_next(const store::webhook_record& w, bool& more) {
  const auto types = types_of(w.types_json);
  store::audit_store chain(db_);
  std::int64_t cursor = w.cursor;
  std::optional<store::webhook_delivery> taken;
  for (int page = 0; page < pages_per_take && !taken; ++page) {
    store::audit_filter f;
    f.after_seq = cursor;
    f.limit = audit_page;
    f.lifecycle_only = true;  // through audit_lifecycle: the exec and file rows between are not read
    auto rows = chain.list_audit_events(w.org_id, f);
    if (!rows) {
      spdlog::warn("webhooks: reading the chain of {}: {}", w.org_id, rows.err().message);
      return std::nullopt;
    }
    for (const auto& row : *rows) {
      cursor = row.seq;
      auto e = audit::lifecycle_event_of(row);
      if (!e || !wanted(types, e->type)) continue;
      store::webhook_delivery d;
      d.org_id = w.org_id;
      d.webhook_id = w.id;
      d.seq = e->seq;
      d.type = e->type;
      d.state = "pending";
      d.next_attempt_ms = now_ms();
      d.created_at = format_time(clk_.now());
      taken = std::move(d);
      break;
    }
    if (rows->size() < audit_page) break;
    if (page + 1 == pages_per_take && !taken) more = true;
  }
  if (cursor == w.cursor) return std::nullopt;
  auto tx = db_.begin();
  if (!tx) return std::nullopt;
  auto moved = store_.take(w.org_id, w.id, w.cursor, cursor, taken);
  if (!moved) {
    if (moved.err().code != errc::conflict) spdlog::warn("webhooks: {} of {}: {}", w.id, w.org_id, moved.err().message);
    return std::nullopt;
  }
  if (auto done = tx->commit(); !done) {
    spdlog::warn("webhooks: {} of {}: {}", w.id, w.org_id, done.err().message);
    return std::nullopt;
  }
  return taken;
}

asio::awaitable<void> dispatcher::attempt(store::webhook_record w, store::webhook_delivery d) {
  const auto event = event_at(db_, w.org_id, d.seq);
  std::optional<std::int64_t> status;
  std::string failure;
  bool delivered = false;
  std::int64_t event_ms = now_ms();
  if (!event) {
    failure = "event " + std::to_string(d.seq) + " is no longer in the audit chain";
  } else {
    event_ms = ms_of(event->body.value("ts", ""), event_ms);
    auto secret = key_.open(w.sealed_secret, secret_aad(w.org_id, w.id));
    if (!secret) {
      failure = "the signing secret cannot be opened with the secrets key";
    } else {
      const std::string body = event->body.dump(-1, ' ', false, json::error_handler_t::replace);
      const auto t = std::chrono::duration_cast<std::chrono::seconds>(clk_.now().time_since_epoch()).count();
      std::string signature = signature_header(*secret, t, body);
      // After a rotation that kept it, the previous secret signs too until its time is up: a
      // receiver that still has only the old secret verifies meanwhile.
      if (w.previous_secret && w.previous_until_ms && *w.previous_until_ms > now_ms())
        if (auto previous = key_.open(*w.previous_secret, secret_aad(w.org_id, w.id)))
          signature += ",v1=" + signature_v1(*previous, t, body);
      http::header_list headers = {{"Sandfort-Webhook-Id", w.id},
                                   {"Sandfort-Event-Id", event_id(w.org_id, d.seq)},
                                   {"Sandfort-Event-Type", d.type},
                                   {"Sandfort-Signature", signature},
                                   {"User-Agent", "sandfortd-webhooks"}};
      http::url_fetch_options opts;
      opts.timeout = o_.timeout;
      opts.body_limit = o_.response_limit;
      opts.truncate_body = true;
      opts.allow_plain_http = true;  // the operator's choice per webhook; docs/security.md says what it costs
      opts.ca_file = o_.ca_file;
      const proxy::egress_policy* policy = &policy_;
      opts.refuse_address = [policy](const asio::ip::address& a) { return policy->refuse_reason(a); };
      auto posting = http::post_body(w.url, "application/json", body, std::move(headers), std::move(opts));
      auto r = co_await std::move(posting);
      if (!r) {
        failure = r.err().message;
      } else {
        status = static_cast<std::int64_t>(r->result_int());
        delivered = *status >= 200 && *status < 300;
        if (!delivered) failure = "the receiver answered " + std::to_string(*status);
      }
    }
  }
  const auto now = now_ms();
  d.attempts += 1;
  d.last_status = status;
  d.last_error = failure;
  if (delivered) {
    d.state = "delivered";
    d.next_attempt_ms.reset();
    d.finished_ms = now;
    d.delivered_at = format_time(clk_.now());
  } else {
    auto next = event ? next_attempt_ms(o_.retry, event_ms, now, d.attempts, jitter_()) : std::nullopt;
    if (next) {
      d.next_attempt_ms = next;
    } else {
      d.state = "failed";
      d.next_attempt_ms.reset();
      d.finished_ms = now;
      spdlog::warn("webhooks: {} of {}: event {} failed after {} attempt(s): {}", w.id, w.org_id, d.seq, d.attempts,
                   failure);
    }
  }
  if (auto r = store_.record_attempt(d); !r)
    spdlog::warn("webhooks: {} of {}: recording an attempt: {}", w.id, w.org_id, r.err().message);
  busy_.erase({w.org_id, w.id});
  --in_flight_;
  wake();
}

}  // namespace sandfort::webhooks
