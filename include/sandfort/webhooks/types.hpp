#pragma once
// Webhooks as the API sees them (docs/events.md, "Webhooks"): plain values, no storage.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sandfort::webhooks {

struct webhook_view {
  std::string id;  // whk-<16 hex>
  std::string url;
  std::vector<std::string> types;  // empty: every type
  std::string description;
  bool enabled = true;
  std::int64_t cursor = 0;  // the last audit seq it took
  std::string created_at;
  std::string updated_at;
};

// A webhook with its signing secret: what create and rotate-secret answer, once.
struct webhook_with_secret {
  webhook_view webhook;
  std::string secret;
};

struct webhook_create {
  std::string url;
  std::vector<std::string> types;
  std::string description;
};

struct webhook_patch {
  std::optional<std::string> url;
  std::optional<std::vector<std::string>> types;
  std::optional<std::string> description;
  std::optional<bool> enabled;
};

struct delivery_view {
  std::int64_t seq = 0;
  std::string event_id;  // Sandfort-Event-Id
  std::string type;
  std::string state;  // pending | delivered | failed
  std::int64_t attempts = 0;
  std::optional<std::int64_t> last_status;
  std::string last_error;
  std::optional<std::string> next_attempt_at;  // pending only
  std::string created_at;
  std::optional<std::string> delivered_at;
};

struct delivery_page {
  std::vector<delivery_view> items;
  std::string next_cursor;  // empty: the last page
};

}  // namespace sandfort::webhooks
