#include "sandfort/audit/lifecycle_events.hpp"

#include <algorithm>

namespace sandfort::audit {

using nlohmann::json;

const std::vector<std::string>& lifecycle_event_types() {
  static const std::vector<std::string> types = {
      "sandbox.created",  "sandbox.started",  "sandbox.stopped", "sandbox.paused",    "sandbox.resumed",
      "sandbox.deleted",  "snapshot.created", "snapshot.deleted", "volume.created",   "volume.deleted",
      "quota.refused",    "rate_limit.refused", "egress.denied"};
  return types;
}

bool is_lifecycle_event_type(std::string_view type) {
  const auto& types = lifecycle_event_types();
  return std::find(types.begin(), types.end(), type) != types.end();
}

namespace {

bool mentions(const std::string& text, std::string_view word) { return text.find(word) != std::string::npos; }

// The reason of a stop recorded before reasons were (or without one): read from its message.
std::string reason_of_stop(const event_record& e, const json& details) {
  if (auto it = details.find("reason"); it != details.end() && it->is_string()) return it->get<std::string>();
  const std::string state = details.value("state", "");
  const std::string message = details.contains("message") && details["message"].is_string()
                                  ? details["message"].get<std::string>()
                                  : std::string();
  if (state == "error") return "error";
  if (mentions(message, "kill switch")) return "kill_switch";
  if (mentions(message, "TTL reached")) return "ttl";
  if (mentions(message, "idle for")) return "idle_timeout";
  if (mentions(message, "disk_mb")) return "disk_quota";
  if (mentions(message, "out of memory")) return "oom";
  if (mentions(message, "when sandfortd started")) return "daemon_restart";
  if (e.action == "sandbox.stop" && message.empty()) return "request";
  return "exited";
}

// The type of a `sandbox.state` event (a change the daemon made itself), or empty: provisioning
// steps and a state recorded again unchanged (an address learned) are no events.
std::string type_of_state(const json& details) {
  const std::string state = details.value("state", "");
  if (auto from = details.find("from"); from != details.end() && from->is_string() && *from == state) return {};
  if (state == "started") return "sandbox.started";
  if (state == "stopped" || state == "error") return "sandbox.stopped";
  if (state == "deleted") return "sandbox.deleted";
  return {};
}

std::string type_of(const event_record& e, const json& details) {
  const std::string& a = e.action;
  if (a == "sandbox.state") return type_of_state(details);
  if (e.outcome != "ok" && e.outcome != "denied") return {};  // the first half of a two-step action
  if (a == "sandbox.create") return "sandbox.created";
  if (a == "sandbox.start") return "sandbox.started";
  if (a == "sandbox.stop") return "sandbox.stopped";
  if (a == "sandbox.pause") return "sandbox.paused";
  if (a == "sandbox.resume") return "sandbox.resumed";
  if (a == "sandbox.delete") return "sandbox.deleted";
  if (a == "snapshot.create") return "snapshot.created";
  if (a == "snapshot.delete") return "snapshot.deleted";
  if (a == "volume.create") return "volume.created";
  if (a == "volume.delete") return "volume.deleted";
  if (a.starts_with("guardrail.")) return "quota.refused";
  if (a == "rate_limit.exceeded") return "rate_limit.refused";
  if (a == "egress" && e.outcome == "denied") return "egress.denied";
  return {};
}

}  // namespace

std::optional<lifecycle_event> lifecycle_event_of(const event_record& e) {
  json details = json::parse(e.details, nullptr, /*allow_exceptions=*/false);
  if (details.is_discarded() || !details.is_object()) details = json::object();
  std::string type = type_of(e, details);
  if (type.empty()) return std::nullopt;
  lifecycle_event out;
  out.seq = e.seq;
  out.type = type;
  out.body = {{"seq", e.seq},       {"type", type},       {"ts", e.ts},           {"org_id", e.org_id},
              {"target", e.target}, {"actor", e.actor},   {"outcome", e.outcome}, {"action", e.action}};
  if (type == "sandbox.stopped") out.body["reason"] = reason_of_stop(e, details);
  out.body["details"] = std::move(details);
  return out;
}

}  // namespace sandfort::audit
