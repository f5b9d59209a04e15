#include "secret_backend.hpp"

#include <spdlog/spdlog.h>

#include "sandfort/sandbox/types.hpp"
#include "sandfort/secrets/interception_ca.hpp"
#include "sandfort/secrets/placement_json.hpp"
#include "sandfort/store/org_store.hpp"
#include "sandfort/store/secret_store.hpp"

namespace sandfort::daemon {

namespace {

using nlohmann::json;

secrets::secret_view view_of(const store::secret_record& r) {
  secrets::secret_view v;
  v.name = r.name;
  v.hosts = json::parse(r.hosts_json, nullptr, false).get<std::vector<std::string>>();
  v.placement = secrets::placement_from_json(json::parse(r.placement_json, nullptr, false));
  v.version = r.version;
  v.created_at = r.created_at;
  v.updated_at = r.updated_at;
  return v;
}

// What the chain keeps of a secret: its name and hosts, never its value.
audit::record secret_event(const std::string& action, const std::string& name, const std::vector<std::string>& hosts,
                           json more = json::object()) {
  json details{{"name", name}, {"hosts", hosts}};
  details.update(more);
  return audit::record{action, name, "ok", std::move(details)};
}

class secret_adapter final : public api::secret_backend {
 public:
  secret_adapter(const config& cfg, store::database& db, audit::journal& journal, const clock& clk,
                 const secrets::sealing_key& key)
      : cfg_(cfg), db_(db), store_(db), journal_(journal), clk_(clk), key_(key) {}

  result<secrets::secret_view> create(const std::string& org_id, const secrets::secret_create& req,
                                      const audit::actor& who) override {
    // Counted and inserted with nothing awaited between: parallel creates cannot overshoot.
    auto held = store_.count(org_id);
    if (!held) return std::move(held).err();
    if (auto room = sandbox::admit_count(journal_, org_id, who,
                                         {"secrets", cfg_.secrets.max_per_org, *held, "delete some", {}});
        !room)
      return std::move(room).err();
    const auto now = format_time(clk_.now());
    store::secret_record r{org_id,
                           req.name,
                           key_.seal(req.value, secrets::value_aad(org_id, req.name)),
                           key_.key_id(),
                           json(req.hosts).dump(),
                           secrets::placement_json(req.placement).dump(),
                           1,
                           now,
                           now};
    auto made = journal_.record_change(
        {org_id}, who, [&] { return store_.insert(r); },
        [&] { return secret_event("secret.create", req.name, req.hosts); });
    if (!made) return std::move(made).err();
    return view_of(r);
  }

  result<std::vector<secrets::secret_view>> list(const std::string& org_id) override {
    auto rows = store_.list(org_id);
    if (!rows) return std::move(rows).err();
    std::vector<secrets::secret_view> out;
    for (const auto& r : *rows) out.push_back(view_of(r));
    return out;
  }

  result<secrets::secret_view> get(const std::string& org_id, const std::string& name) override {
    auto r = store_.get(org_id, name);
    if (!r) return std::move(r).err();
    return view_of(*r);
  }

  result<secrets::secret_view> rotate(const std::string& org_id, const std::string& name,
                                      const secrets::secret_rotate& req, const audit::actor& who) override {
    auto before = store_.get(org_id, name);
    if (!before) return std::move(before).err();
    std::optional<std::string> sealed, key_id, hosts_json;
    if (req.value) {
      sealed = key_.seal(*req.value, secrets::value_aad(org_id, name));
      key_id = key_.key_id();
    }
    if (req.hosts) hosts_json = json(*req.hosts).dump();
    const auto hosts = req.hosts ? *req.hosts : view_of(*before).hosts;
    auto done = journal_.record_change(
        {org_id}, who, [&] { return store_.update(org_id, name, sealed, key_id, hosts_json, format_time(clk_.now())); },
        [&] {
          return secret_event("secret.rotate", name, hosts,
                              {{"value_changed", req.value.has_value()}, {"version", before->version + 1}});
        });
    if (!done) return std::move(done).err();
    return get(org_id, name);
  }

  result<void> remove(const std::string& org_id, const std::string& name, const audit::actor& who) override {
    auto before = store_.get(org_id, name);
    if (!before) return std::move(before).err();
    const auto hosts = view_of(*before).hosts;
    return journal_.record_change(
        {org_id}, who, [&] { return store_.remove(org_id, name); },
        [&] { return secret_event("secret.delete", name, hosts); });
  }

  result<int> remove_all(const std::string& org_id, const audit::actor& who) override {
    auto rows = store_.list(org_id);
    if (!rows) return std::move(rows).err();
    int removed = 0;
    for (const auto& r : *rows) {
      if (auto done = remove(org_id, r.name, who); !done && done.err().code != errc::not_found)
        return std::move(done).err();
      ++removed;
    }
    if (auto done = store_.remove_interception_ca(org_id); !done) return std::move(done).err();
    return removed;
  }

  result<std::string> interception_ca_pem(const std::string& org_id) override {
    auto stored = store_.interception_ca(org_id);
    if (!stored) return std::move(stored).err();
    if (*stored) return (*stored)->certificate_pem;
    auto o = store::org_store(db_).get_org(org_id);
    if (!o) return std::move(o).err();
    const auto ca = secrets::interception_ca::generate(org_id, o->name, clk_.now());
    auto key_pem = ca.private_key_pem();
    store::interception_ca_record r{org_id, ca.certificate_pem(), key_.seal(key_pem, secrets::ca_key_aad(org_id)),
                                    key_.key_id(), format_time(clk_.now())};
    wipe(key_pem);
    auto inserted = store_.insert_interception_ca(r);
    if (!inserted) return std::move(inserted).err();
    if (*inserted) {
      spdlog::info("secrets: made the interception CA of {}", org_id);
      return r.certificate_pem;
    }
    auto again = store_.interception_ca(org_id);  // another request made it first
    if (!again) return std::move(again).err();
    if (!*again) return make_error(errc::internal, "interception CA of " + org_id + " vanished");
    return (*again)->certificate_pem;
  }

 private:
  static void wipe(std::string& s) {
    volatile char* p = s.data();
    for (std::size_t i = 0; i < s.size(); ++i) p[i] = 0;
  }

  const config& cfg_;
  store::database& db_;
  store::secret_store store_;
  audit::journal& journal_;
  const clock& clk_;
  const secrets::sealing_key& key_;
};

}  // namespace

std::unique_ptr<api::secret_backend> make_secret_backend(const config& cfg, store::database& db, audit::journal& journal,
                                                         const clock& clk, const secrets::sealing_key& key) {
  return std::make_unique<secret_adapter>(cfg, db, journal, clk, key);
}

}  // namespace sandfort::daemon
