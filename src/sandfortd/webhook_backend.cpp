#include "webhook_backend.hpp"

#include "sandfort/core/ids.hpp"
#include "sandfort/sandbox/types.hpp"
#include "sandfort/store/audit_store.hpp"
#include "sandfort/store/webhook_store.hpp"
#include "sandfort/webhooks/destination.hpp"
#include "sandfort/webhooks/signing.hpp"

namespace sandfort::daemon {

namespace {

using nlohmann::json;

webhooks::webhook_view view_of(const store::webhook_record& r) {
  webhooks::webhook_view v;
  v.id = r.id;
  v.url = r.url;
  auto types = json::parse(r.types_json, nullptr, false);
  if (types.is_array())
    for (const auto& t : types)
      if (t.is_string()) v.types.push_back(t.get<std::string>());
  v.description = r.description;
  v.enabled = r.enabled;
  v.cursor = r.cursor;
  v.created_at = r.created_at;
  v.updated_at = r.updated_at;
  return v;
}

std::string time_of_ms(std::int64_t ms) {
  return format_time(time_point(std::chrono::milliseconds(ms)));
}

// What the chain keeps of a URL: scheme, host and port. Its path and query often carry a
// receiver's token, and the chain is read by every admin and exported.
std::string destination_of(const std::string& url) {
  auto parts = http::parse_url(url);
  if (!parts) return "";
  return parts->scheme + "://" + http::host_header(*parts);
}

class webhook_adapter final : public api::webhook_backend {
 public:
  webhook_adapter(const config& cfg, store::database& db, audit::journal& journal, const clock& clk,
                  const secrets::sealing_key& key, proxy::name_resolver& resolver, webhooks::dispatcher& worker)
      : cfg_(cfg), db_(db), store_(db), journal_(journal), clk_(clk), key_(key), resolver_(resolver), worker_(worker) {}

  api::task<webhooks::webhook_with_secret> create(const std::string& org_id, const webhooks::webhook_create& req,
                                                  const audit::actor& who) override {
    auto checking = check_url(req.url);  // named: GCC 12 and temporaries in a co_await expression
    auto checked = co_await std::move(checking);
    if (!checked) co_return std::move(checked).err();
    // Counted and inserted with nothing awaited between: parallel creates cannot overshoot.
    auto held = store_.count(org_id);
    if (!held) co_return std::move(held).err();
    if (auto room = sandbox::admit_count(journal_, org_id, who,
                                         {"webhooks", cfg_.webhooks.max_per_org, *held, "delete some", {}});
        !room)
      co_return std::move(room).err();
    const auto now = format_time(clk_.now());
    const std::string id = "whk-" + random_hex(8);
    const std::string secret = webhooks::new_secret();
    store::webhook_record r{org_id,
                            id,
                            req.url,
                            json(req.types).dump(),
                            req.description,
                            true,
                            key_.seal(secret, webhooks::secret_aad(org_id, id)),
                            key_.key_id(),
                            0,
                            now,
                            now};
    auto made = journal_.record_change(
        {org_id}, who,
        [&]() -> result<void> {
          // A new webhook starts at the chain's end: it is told of what happens from now on.
          auto head = store::audit_store(db_).audit_head_of(org_id);
          if (!head) return std::move(head).err();
          r.cursor = head->seq;
          return store_.insert(r);
        },
        [&] {
          return audit::record{"webhook.create", id, "ok",
                               {{"destination", destination_of(req.url)}, {"types", req.types}}};
        });
    if (!made) co_return std::move(made).err();
    worker_.wake();
    co_return webhooks::webhook_with_secret{view_of(r), secret};
  }

  result<std::vector<webhooks::webhook_view>> list(const std::string& org_id) override {
    auto rows = store_.list(org_id);
    if (!rows) return std::move(rows).err();
    std::vector<webhooks::webhook_view> out;
    for (const auto& r : *rows) out.push_back(view_of(r));
    return out;
  }

  result<webhooks::webhook_view> get(const std::string& org_id, const std::string& id) override {
    auto r = store_.get(org_id, id);
    if (!r) return std::move(r).err();
    return view_of(*r);
  }

  api::task<webhooks::webhook_view> update(const std::string& org_id, const std::string& id,
                                           const webhooks::webhook_patch& req, const audit::actor& who) override {
    if (auto before = store_.get(org_id, id); !before) co_return std::move(before).err();
    if (req.url) {
      auto checking = check_url(*req.url);
      auto checked = co_await std::move(checking);
      if (!checked) co_return std::move(checked).err();
    }
    store::webhook_update u;
    u.url = req.url;
    if (req.types) u.types_json = json(*req.types).dump();
    u.description = req.description;
    u.enabled = req.enabled;
    json details = json::object();
    json changed = json::array();
    if (req.url) {
      changed.push_back("url");
      details["destination"] = destination_of(*req.url);
    }
    if (req.types) {
      changed.push_back("types");
      details["types"] = *req.types;
    }
    if (req.description) changed.push_back("description");
    if (req.enabled) {
      changed.push_back("enabled");
      details["enabled"] = *req.enabled;
    }
    details["changed"] = changed;
    auto done = journal_.record_change(
        {org_id}, who, [&] { return store_.update(org_id, id, u, format_time(clk_.now())); },
        [&] { return audit::record{"webhook.update", id, "ok", details}; });
    if (!done) co_return std::move(done).err();
    worker_.wake();
    co_return get(org_id, id);
  }

  result<void> remove(const std::string& org_id, const std::string& id, const audit::actor& who) override {
    auto before = store_.get(org_id, id);
    if (!before) return std::move(before).err();
    return journal_.record_change(
        {org_id}, who, [&] { return store_.remove(org_id, id); },
        [&] {
          return audit::record{"webhook.delete", id, "ok", {{"destination", destination_of(before->url)}}};
        });
  }

  result<webhooks::webhook_with_secret> rotate_secret(const std::string& org_id, const std::string& id,
                                                      std::int64_t keep_previous_s, const audit::actor& who) override {
    if (auto before = store_.get(org_id, id); !before) return std::move(before).err();
    const std::string secret = webhooks::new_secret();
    const auto sealed = key_.seal(secret, webhooks::secret_aad(org_id, id));
    std::optional<std::int64_t> keep_until;
    if (keep_previous_s > 0)
      keep_until = std::chrono::duration_cast<std::chrono::milliseconds>(clk_.now().time_since_epoch()).count() +
                   keep_previous_s * 1000;
    auto done = journal_.record_change(
        {org_id}, who,
        [&] { return store_.rotate_secret(org_id, id, sealed, key_.key_id(), keep_until, format_time(clk_.now())); },
        [&] {
          return audit::record{"webhook.update", id, "ok",
                               {{"changed", json::array({"secret"})},
                                {"secret_rotated", true},
                                {"keep_previous_s", keep_previous_s}}};
        });
    if (!done) return std::move(done).err();
    auto v = get(org_id, id);
    if (!v) return std::move(v).err();
    return webhooks::webhook_with_secret{std::move(*v), secret};
  }

  result<webhooks::delivery_page> deliveries(const std::string& org_id, const std::string& id, std::int64_t before,
                                             std::size_t limit) override {
    if (auto w = store_.get(org_id, id); !w) return std::move(w).err();
    auto rows = store_.deliveries(org_id, id, before, limit + 1);
    if (!rows) return std::move(rows).err();
    webhooks::delivery_page page;
    for (const auto& d : *rows) {
      if (page.items.size() == limit) {
        page.next_cursor = std::to_string(page.items.back().seq);
        break;
      }
      webhooks::delivery_view v;
      v.seq = d.seq;
      v.event_id = webhooks::event_id(org_id, d.seq);
      v.type = d.type;
      v.state = d.state;
      v.attempts = d.attempts;
      v.last_status = d.last_status;
      v.last_error = d.last_error;
      if (d.next_attempt_ms) v.next_attempt_at = time_of_ms(*d.next_attempt_ms);
      v.created_at = d.created_at;
      v.delivered_at = d.delivered_at;
      page.items.push_back(std::move(v));
    }
    return page;
  }

  result<int> remove_all(const std::string& org_id, const audit::actor& who) override {
    auto rows = store_.list(org_id);
    if (!rows) return std::move(rows).err();
    int removed = 0;
    for (const auto& r : *rows) {
      if (auto done = remove(org_id, r.id, who); !done && done.err().code != errc::not_found)
        return std::move(done).err();
      ++removed;
    }
    return removed;
  }

 private:
  api::task<void> check_url(const std::string& url) {
    auto parts = webhooks::parse_webhook_url(url);
    if (!parts) co_return std::move(parts).err();
    auto checking = webhooks::check_destination(*parts, resolver_, worker_.policy());
    co_return co_await std::move(checking);
  }

  const config& cfg_;
  store::database& db_;
  store::webhook_store store_;
  audit::journal& journal_;
  const clock& clk_;
  const secrets::sealing_key& key_;
  proxy::name_resolver& resolver_;
  webhooks::dispatcher& worker_;
};

}  // namespace

std::unique_ptr<api::webhook_backend> make_webhook_backend(const config& cfg, store::database& db,
                                                           audit::journal& journal, const clock& clk,
                                                           const secrets::sealing_key& key,
                                                           proxy::name_resolver& resolver,
                                                           webhooks::dispatcher& worker) {
  return std::make_unique<webhook_adapter>(cfg, db, journal, clk, key, resolver, worker);
}

}  // namespace sandfort::daemon
