// Guardrails (admission.hpp, docs/guardrails.md): what an organization may take (quotas, image
// and runtime policies), its kill switch, and the reaper that stops sandboxes past their TTL or
// idle timeout and deletes them after a grace period. Every decision is in the organization's
// audit chain.
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <tuple>

#include "sandfort/core/runtimes.hpp"
#include "sandfort/sandbox/admission.hpp"
#include "sandfort/sandbox/spec.hpp"

namespace sandfort::sandbox {

namespace asio = boost::asio;
using nlohmann::json;

namespace {

// '*' matches any run of characters (none included); everything else matches itself.
bool glob_match(std::string_view pattern, std::string_view text) {
  std::size_t p = 0, t = 0, star = std::string_view::npos, resume = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

// A paused sandbox keeps its memory (and its CPU share is only idle): it counts as running.
bool running(const std::string& state) {
  return state == "creating" || state == "pulling" || state == "started" || state == "paused";
}

std::string number(double v) {
  std::string s = json(v).dump();
  return s.size() > 2 && s.ends_with(".0") ? s.substr(0, s.size() - 2) : s;
}

// A stored list (image patterns, runtimes): a JSON array of strings, `what` naming it in errors.
result<std::vector<std::string>> strings_from_json(const std::string& text, const std::string& what) {
  auto j = json::parse(text, nullptr, false);
  if (!j.is_array()) return make_error(errc::internal, "stored " + what + " are not a JSON array");
  std::vector<std::string> out;
  for (const auto& p : j) {
    if (!p.is_string()) return make_error(errc::internal, "stored " + what + " are not strings");
    out.push_back(p.get<std::string>());
  }
  return out;
}

result<void> check_patterns(const std::vector<std::string>& patterns) {
  if (patterns.size() > 100) return make_error(errc::invalid_argument, "allowed_images: at most 100 patterns");
  for (const auto& p : patterns)
    if (p.empty() || p.size() > 255 || p.find_first_of(" \t\r\n") != std::string::npos)
      return make_error(errc::invalid_argument, "allowed_images: each pattern is 1-255 characters without spaces");
  return {};
}

// An organization's runtimes (runtimes.hpp); null, not an empty list, goes back to the default.
result<void> check_runtimes(const std::vector<std::string>& runtimes, const config& cfg) {
  auto checked = check_runtime_list(runtimes, cfg.gvisor_runtime);
  if (!checked)
    return make_error(errc::invalid_argument, "allowed_runtimes: " + checked.err().message +
                                                  (runtimes.empty() ? "; null goes back to the default" : ""));
  return {};
}

std::string when(time_point t) { return format_time(t); }

}  // namespace

org_limits limits_in_force(const guardrails_config& d, const store::org_guardrails& own) {
  org_limits l{d.max_sandboxes, d.max_cpus, d.max_memory_mb, d.allowed_images, d.max_volumes, d.max_snapshots};
  if (own.max_sandboxes) l.max_sandboxes = *own.max_sandboxes;
  if (own.max_millicpus) l.max_cpus = static_cast<double>(*own.max_millicpus) / 1000.0;
  if (own.max_memory_mb) l.max_memory_mb = *own.max_memory_mb;
  if (own.allowed_images_json)
    if (auto p = strings_from_json(*own.allowed_images_json, "image patterns")) l.allowed_images = std::move(*p);
  l.allowed_runtimes = d.allowed_runtimes;
  // An unreadable stored list would widen the policy if it fell back to the default: nothing
  // is allowed then, and every create says so.
  if (own.allowed_runtimes_json) {
    auto r = strings_from_json(*own.allowed_runtimes_json, "runtimes");
    l.allowed_runtimes = r ? std::move(*r) : std::vector<std::string>{};
  }
  if (own.max_volumes) l.max_volumes = *own.max_volumes;
  if (own.max_snapshots) l.max_snapshots = *own.max_snapshots;
  l.max_disk_mb = own.max_disk_mb ? *own.max_disk_mb : d.max_disk_mb;
  return l;
}

std::string default_runtime_of(const org_limits& limits, const std::string& configured_default) {
  const auto& allowed = limits.allowed_runtimes;
  if (allowed.empty() || std::find(allowed.begin(), allowed.end(), configured_default) != allowed.end())
    return configured_default;
  return allowed.front();
}

result<void> admit_count(audit::journal& journal, const std::string& org_id, const audit::actor& who,
                         const count_quota& q) {
  if (q.in_use + 1 <= q.limit) return {};
  json details{{"quota", q.quota}, {"limit", q.limit}, {"in_use", q.in_use}};
  for (const auto& [k, v] : q.details) details[k] = v;
  // The refusal is recorded; if even that fails, the call is still refused.
  (void)journal.record_event(org_id, who, {"guardrail.quota_exceeded", "", "denied", std::move(details)});
  return make_error(errc::quota_exceeded, "quota exceeded: " + q.quota + " — " + std::to_string(q.in_use) + " of " +
                                              std::to_string(q.limit) + " in use (" + q.remedy + ")");
}

admitted_create::admitted_create(std::shared_ptr<creates_in_flight> creating, std::string org_id)
    : creating_(std::move(creating)), org_id_(std::move(org_id)) {
  ++(*creating_)[org_id_];
}

admitted_create::~admitted_create() {
  if (!creating_) return;
  if (auto it = creating_->find(org_id_); it != creating_->end() && --it->second <= 0) creating_->erase(it);
}

result<admitted_create> admit_create(audit::journal& journal, const std::string& org_id, const audit::actor& who,
                                     count_quota q, const std::shared_ptr<creates_in_flight>& creating) {
  if (auto it = creating->find(org_id); it != creating->end()) q.in_use += it->second;
  if (auto r = admit_count(journal, org_id, who, q); !r) return std::move(r).err();
  return admitted_create(creating, org_id);
}

admission::admission(asio::any_io_executor executor, const config& cfg, store::database& db, const clock& clk,
                     activity_tracker& activity, host_memory& host, warm_pool& pool, sandbox_stopper& lifecycle)
    : executor_(std::move(executor)), cfg_(cfg), sandboxes_(db), guardrails_(db), resources_(db), clock_(clk),
      journal_(db, clk), activity_(activity), host_(host), pool_(pool), lifecycle_(lifecycle) {}

admission::start_mark::start_mark(std::shared_ptr<std::set<std::string>> starting, std::string sandbox_id)
    : starting_(std::move(starting)), sandbox_id_(std::move(sandbox_id)) {
  starting_->insert(sandbox_id_);
}

admission::start_mark::~start_mark() { starting_->erase(sandbox_id_); }

org_limits admission::limits_of(const store::org_guardrails& own) const {
  return limits_in_force(cfg_.guardrails, own);
}

result<std::string> admission::default_runtime(const std::string& org_id) {
  auto own = guardrails_.get_org_guardrails(org_id);
  if (!own) return std::move(own).err();
  return default_runtime_of(limits_of(*own), cfg_.default_runtime);
}

result<org_guardrails_view> admission::guardrails(const std::string& org_id) {
  auto own = guardrails_.get_org_guardrails(org_id);
  if (!own) return std::move(own).err();
  auto live = sandboxes_.list_live_sandboxes(org_id);
  if (!live) return std::move(live).err();
  org_guardrails_view v;
  v.org_id = org_id;
  v.limits = limits_of(*own);
  for (auto [name, set] : {std::pair{"max_sandboxes", own->max_sandboxes.has_value()},
                           std::pair{"max_cpus", own->max_millicpus.has_value()},
                           std::pair{"max_memory_mb", own->max_memory_mb.has_value()},
                           std::pair{"allowed_images", own->allowed_images_json.has_value()},
                           std::pair{"max_volumes", own->max_volumes.has_value()},
                           std::pair{"max_snapshots", own->max_snapshots.has_value()},
                           std::pair{"max_disk_mb", own->max_disk_mb.has_value()},
                           std::pair{"allowed_runtimes", own->allowed_runtimes_json.has_value()}})
    if (set) v.own_fields.push_back(name);
  auto volumes = resources_.count_live_volumes(org_id);
  if (!volumes) return std::move(volumes).err();
  auto snapshots = resources_.count_live_snapshots(org_id);
  if (!snapshots) return std::move(snapshots).err();
  v.usage.volumes = *volumes;
  v.usage.snapshots = *snapshots;
  for (const auto& rec : *live) {
    ++v.usage.sandboxes;
    auto spec = spec_from_json(rec.spec_json);
    v.usage.disk_mb += disk_limit_mb(spec.limits, cfg_.disk);  // stopped ones keep their disk
    if (!running(rec.state) && !starting_->contains(rec.id)) continue;
    ++v.usage.running;
    v.usage.cpus += spec.limits.cpus;
    v.usage.memory_mb += spec.limits.memory_mb;
  }
  v.stopped_since = own->stopped_since;
  v.stopped_by_superadmin = own->stopped_by_superadmin;
  return v;
}

result<void> admission::admit(const std::string& org_id, const sandbox_spec& spec, const std::string& image,
                            const std::string& restarting, const audit::actor& who, bool own_snapshot) {
  auto g = guardrails(org_id);
  if (!g) return std::move(g).err();
  const auto refuse = [&](errc code, const std::string& action, std::string message, json details) -> result<void> {
    details["image"] = image;
    if (!restarting.empty()) details["sandbox"] = restarting;
    // The refusal is recorded; if even that fails, the call is still refused.
    (void)journal_.record_event(org_id, who, {action, restarting, "denied", std::move(details)});
    return make_error(code, std::move(message));
  };
  if (g->stopped_since)
    return refuse(errc::conflict, "guardrail.org_stopped",
                  "organization " + org_id + " is stopped (kill switch, since " + *g->stopped_since +
                      "): no sandbox may be created or started until it is lifted",
                  {{"since", *g->stopped_since}});
  const auto& l = g->limits;
  // Checked for a start too, unlike the image: the runtime is the sandbox's isolation, and a
  // stopped runc sandbox cannot be moved onto gVisor; it is recreated (a snapshot keeps its files).
  if (std::find(l.allowed_runtimes.begin(), l.allowed_runtimes.end(), spec.runtime) == l.allowed_runtimes.end()) {
    const auto allowed = json(l.allowed_runtimes).dump();
    return refuse(errc::runtime_not_allowed, "guardrail.runtime_not_allowed",
                  restarting.empty()
                      ? "runtime " + spec.runtime + " is not allowed for this organization (allowed: " + allowed +
                            "); ask for one of those, or name no runtime"
                      : "sandbox " + restarting + " runs on " + spec.runtime +
                            ", which this organization no longer allows (allowed: " + allowed +
                            "); snapshot it and create a sandbox from the snapshot instead",
                  {{"runtime", spec.runtime}, {"allowed", l.allowed_runtimes}});
  }
  if (restarting.empty()) {
    const bool allowed = std::any_of(l.allowed_images.begin(), l.allowed_images.end(),
                                     [&](const std::string& p) { return glob_match(p, image); });
    if (!allowed && !own_snapshot)
      return refuse(errc::image_not_allowed, "guardrail.image_not_allowed",
                    "image " + image + " is not allowed for this organization (allowed: " +
                        json(l.allowed_images).dump() + ")",
                    {{"allowed", l.allowed_images}});
    if (auto r = admit_count(journal_, org_id, who,
                             {"sandboxes", l.max_sandboxes, g->usage.sandboxes, "stopped ones count; delete some",
                              {{"image", image}}});
        !r)
      return r;
    // Disk: reserved by every sandbox not deleted, so checked for new ones only.
    const auto disk_mb = disk_limit_mb(spec.limits, cfg_.disk);
    if (g->usage.disk_mb + disk_mb > l.max_disk_mb)
      return refuse(errc::quota_exceeded, "guardrail.quota_exceeded",
                    "quota exceeded: disk_mb — " + std::to_string(g->usage.disk_mb) + " of " +
                        std::to_string(l.max_disk_mb) + " reserved by sandboxes (stopped ones count; delete some), " +
                        std::to_string(disk_mb) + " more asked",
                    {{"quota", "disk_mb"}, {"limit", l.max_disk_mb}, {"in_use", g->usage.disk_mb}, {"asked", disk_mb}});
  }
  if (g->usage.cpus + spec.limits.cpus > l.max_cpus + 1e-9)
    return refuse(errc::quota_exceeded, "guardrail.quota_exceeded",
                  "quota exceeded: cpus — " + number(g->usage.cpus) + " of " + number(l.max_cpus) +
                      " in use by running sandboxes, " + number(spec.limits.cpus) + " more asked",
                  {{"quota", "cpus"}, {"limit", number(l.max_cpus)}, {"in_use", number(g->usage.cpus)},
                   {"asked", number(spec.limits.cpus)}});
  if (g->usage.memory_mb + spec.limits.memory_mb > l.max_memory_mb)
    return refuse(errc::quota_exceeded, "guardrail.quota_exceeded",
                  "quota exceeded: memory_mb — " + std::to_string(g->usage.memory_mb) + " of " +
                      std::to_string(l.max_memory_mb) + " in use by running sandboxes, " +
                      std::to_string(spec.limits.memory_mb) + " more asked",
                  {{"quota", "memory_mb"}, {"limit", l.max_memory_mb}, {"in_use", g->usage.memory_mb},
                   {"asked", spec.limits.memory_mb}});
  return {};
}

result<org_guardrails_view> admission::set_limits(const std::string& org_id, const limits_update& u,
                                                const audit::actor& who) {
  auto own = guardrails_.get_org_guardrails(org_id);
  if (!own) return std::move(own).err();
  store::org_guardrails next = *own;
  if (u.max_sandboxes) {
    if (*u.max_sandboxes && (**u.max_sandboxes < 0 || **u.max_sandboxes > 1'000'000))
      return make_error(errc::invalid_argument, "max_sandboxes must be between 0 and 1000000");
    next.max_sandboxes = *u.max_sandboxes;
  }
  if (u.max_cpus) {
    if (*u.max_cpus && !(**u.max_cpus >= 0 && **u.max_cpus <= 100'000))
      return make_error(errc::invalid_argument, "max_cpus must be between 0 and 100000");
    next.max_millicpus = *u.max_cpus ? std::optional<std::int64_t>(static_cast<std::int64_t>(**u.max_cpus * 1000 + 0.5))
                                     : std::nullopt;
  }
  if (u.max_memory_mb) {
    if (*u.max_memory_mb && (**u.max_memory_mb < 0 || **u.max_memory_mb > (std::int64_t{1} << 40)))
      return make_error(errc::invalid_argument, "max_memory_mb must be between 0 and 2^40");
    next.max_memory_mb = *u.max_memory_mb;
  }
  if (u.allowed_images) {
    if (*u.allowed_images)
      if (auto r = check_patterns(**u.allowed_images); !r) return std::move(r).err();
    next.allowed_images_json = *u.allowed_images ? std::optional<std::string>(json(**u.allowed_images).dump()) : std::nullopt;
  }
  if (u.allowed_runtimes) {
    if (*u.allowed_runtimes)
      if (auto r = check_runtimes(**u.allowed_runtimes, cfg_); !r) return std::move(r).err();
    next.allowed_runtimes_json =
        *u.allowed_runtimes ? std::optional<std::string>(json(**u.allowed_runtimes).dump()) : std::nullopt;
  }
  if (u.max_disk_mb) {
    if (*u.max_disk_mb && (**u.max_disk_mb < 0 || **u.max_disk_mb > (std::int64_t{1} << 40)))
      return make_error(errc::invalid_argument, "max_disk_mb must be between 0 and 2^40");
    next.max_disk_mb = *u.max_disk_mb;
  }
  for (auto [field, asked, stored] : {std::tuple{"max_volumes", &u.max_volumes, &next.max_volumes},
                                      std::tuple{"max_snapshots", &u.max_snapshots, &next.max_snapshots}}) {
    if (!*asked) continue;
    if (**asked && (***asked < 0 || ***asked > 1'000'000))
      return make_error(errc::invalid_argument, std::string(field) + " must be between 0 and 1000000");
    *stored = **asked;
  }
  next.updated_at = format_time(clock_.now());
  auto limits = limits_of(next);
  auto done = journal_.record_change(
      {org_id}, who, [&] { return guardrails_.put_org_guardrails(next); },
      [&] {
        return audit::record{"org.limits", org_id, "ok",
                             {{"max_sandboxes", limits.max_sandboxes},
                              {"max_cpus", number(limits.max_cpus)},
                              {"max_memory_mb", limits.max_memory_mb},
                              {"allowed_images", limits.allowed_images},
                              {"max_volumes", limits.max_volumes},
                              {"max_snapshots", limits.max_snapshots},
                              {"max_disk_mb", limits.max_disk_mb},
                              {"allowed_runtimes", limits.allowed_runtimes}}};
      });
  if (!done) return std::move(done).err();
  return guardrails(org_id);
}

namespace {

nlohmann::json egress_set_json(const proxy::egress_rule_set& set) {
  return {{"egress_allowlist", set.allow}, {"egress_deny", set.deny}, {"egress_rules", egress_rules_to_json(set.rules)}};
}

}  // namespace

result<std::optional<proxy::egress_rule_set>> admission::egress_defaults(const std::string& org_id) {
  auto own = guardrails_.get_org_guardrails(org_id);
  if (!own) return std::move(own).err();
  if (!own->egress_defaults_json) return std::optional<proxy::egress_rule_set>();
  auto j = json::parse(*own->egress_defaults_json, nullptr, false);
  if (!j.is_object()) return make_error(errc::internal, "the stored egress defaults are not JSON");
  proxy::egress_rule_set set;
  set.allow = j.value("egress_allowlist", std::vector<std::string>{});
  set.deny = j.value("egress_deny", std::vector<std::string>{});
  if (j.contains("egress_rules")) {
    auto rules = egress_rules_from_json(j["egress_rules"]);
    if (!rules) return std::move(rules).err();
    set.rules = std::move(*rules);
  }
  return std::optional<proxy::egress_rule_set>(std::move(set));
}

result<std::optional<proxy::egress_rule_set>> admission::set_egress_defaults(
    const std::string& org_id, const std::optional<proxy::egress_rule_set>& set, const audit::actor& who) {
  if (set)
    if (auto r = proxy::validate_rule_set(*set); !r) return std::move(r).err();
  auto own = guardrails_.get_org_guardrails(org_id);
  if (!own) return std::move(own).err();
  store::org_guardrails next = *own;
  next.egress_defaults_json = set ? std::optional<std::string>(egress_set_json(*set).dump()) : std::nullopt;
  next.updated_at = format_time(clock_.now());
  auto done = journal_.record_change(
      {org_id}, who, [&] { return guardrails_.put_org_guardrails(next); },
      [&] {
        return audit::record{"org.egress_defaults", org_id, "ok",
                             set ? egress_set_json(*set) : json{{"egress_defaults", nullptr}}};
      });
  if (!done) return std::move(done).err();
  return set;
}

task<stop_all_report> admission::stop_all(const std::string& org_id, bool by_superadmin, const audit::actor& who) {
  auto own = guardrails_.get_org_guardrails(org_id);
  if (!own) co_return std::move(own).err();
  store::org_guardrails next = *own;
  if (!next.stopped_since) next.stopped_since = format_time(clock_.now());
  next.stopped_by_superadmin = next.stopped_by_superadmin || by_superadmin;
  next.updated_at = format_time(clock_.now());
  auto live = sandboxes_.list_live_sandboxes(org_id);
  if (!live) co_return std::move(live).err();
  // The switch first, in one transaction with its event: from here on nothing new starts.
  auto on = journal_.record_change(
      {org_id}, who, [&] { return guardrails_.put_org_guardrails(next); },
      [&] {
        return audit::record{"org.stop_all", org_id, "ok",
                             {{"since", *next.stopped_since}, {"by_superadmin", next.stopped_by_superadmin}}};
      });
  if (!on) co_return std::move(on).err();

  // Then every started sandbox at once; ones still being made stop when they are (provision()).
  auto report = std::make_shared<stop_all_report>();
  auto pending = std::make_shared<std::size_t>(0);
  auto all_done = std::make_shared<asio::steady_timer>(executor_, asio::steady_timer::time_point::max());
  for (auto& rec : *live) {
    if (rec.state != "started" && rec.state != "paused") continue;
    ++*pending;
    asio::co_spawn(executor_, [this, rec, who, report, pending, all_done]() mutable -> asio::awaitable<void> {
      auto r = co_await lifecycle_.halt(rec, "stopped by the organization's kill switch", who, std::nullopt,
                                        stop_reason::kill_switch);
      if (r) report->stopped.push_back(rec.id);
      else report->failed[rec.id] = r.err().message;
      if (--*pending == 0) all_done->cancel();
    }, asio::detached);
  }
  if (*pending > 0) co_await all_done->async_wait(asio::as_tuple(asio::use_awaitable));
  spdlog::warn("organization {}: kill switch on; {} sandbox(es) stopped, {} failed", org_id, report->stopped.size(),
               report->failed.size());
  co_return std::move(*report);
}

result<void> admission::lift_stop(const std::string& org_id, bool by_superadmin, const audit::actor& who) {
  auto own = guardrails_.get_org_guardrails(org_id);
  if (!own) return std::move(own).err();
  if (!own->stopped_since) return {};
  if (own->stopped_by_superadmin && !by_superadmin)
    return make_error(errc::permission_denied, "the operator stopped this organization; only the operator lifts it");
  store::org_guardrails next = *own;
  next.stopped_since.reset();
  next.stopped_by_superadmin = false;
  next.updated_at = format_time(clock_.now());
  return journal_.record_change(
      {org_id}, who, [&] { return guardrails_.put_org_guardrails(next); },
      [&] { return audit::record{"org.stop_all_lifted", org_id, "ok", {{"since", *own->stopped_since}}}; });
}

asio::awaitable<int> admission::reap() {
  auto rows = sandboxes_.list_live_sandboxes_all_orgs();
  if (!rows) co_return 0;
  const auto now = clock_.now();
  const auto grace = std::chrono::seconds(cfg_.guardrails.delete_grace_s);
  int reaped = 0;
  for (auto& rec : *rows) {
    if (rec.state == "creating" || rec.state == "pulling") continue;  // provisioning owns it for now
    time_point expires{};
    const bool expired = rec.expires_at && parse_time(*rec.expires_at, expires) && expires <= now;
    // Past its TTL and its grace, or past its TTL and not worth keeping (error): deleted.
    if (expired && (expires + grace <= now || rec.state == "error")) {
      if (auto r = co_await lifecycle_.remove(rec.org_id, rec.id, audit::system_actor()); r) {
        spdlog::info("sandbox {} reached its TTL and was deleted", rec.id);
        ++reaped;
      }
      continue;
    }
    if (rec.state != "started" && rec.state != "paused") continue;
    std::string why;
    if (expired) {
      why = "TTL reached (expired at " + *rec.expires_at + ")";
    } else {
      // Paused is someone's deliberate choice to keep it, frozen: not idleness.
      if (rec.state == "paused") continue;
      const auto idle_limit = spec_from_json(rec.spec_json).idle_timeout_s;
      const auto idle = activity_.idle_for(rec.id);
      if (idle_limit <= 0 || idle.count() < idle_limit) continue;
      why = "idle for " + std::to_string(idle.count()) + " s (idle_timeout_s " + std::to_string(idle_limit) + ")";
    }
    const store::sandbox_deadline deadline{rec.id, rec.org_id, when(now + grace), expired ? "ttl" : "idle"};
    auto r = co_await lifecycle_.halt(
        rec, "stopped: " + why + "; deleted at " + deadline.delete_after + " unless started again",
        audit::system_actor(), deadline, expired ? stop_reason::ttl : stop_reason::idle_timeout);
    if (r) {
      spdlog::info("sandbox {} stopped: {}", rec.id, why);
      ++reaped;
    }
  }
  // Stopped by a guardrail and not started again within the grace period.
  auto due = guardrails_.due_sandbox_deadlines(when(now), 100);
  if (!due) co_return reaped;
  for (const auto& d : *due) {
    auto r = co_await lifecycle_.remove(d.org_id, d.sandbox_id, audit::system_actor());
    if (r || r.err().code == errc::not_found) (void)guardrails_.clear_sandbox_deadline(d.sandbox_id);
    if (r) {
      spdlog::info("sandbox {} deleted: stopped by its {} guardrail and not started again", d.sandbox_id, d.reason);
      ++reaped;
    }
  }
  co_return reaped;
}

}  // namespace sandfort::sandbox
