#include "migrations.hpp"

#include "sandfort/core/ids.hpp"
#include "statement.hpp"

namespace sandfort::store::detail {
namespace {

constexpr const char* v1_sql = R"sql(
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);

CREATE TABLE orgs (
  id         TEXT PRIMARY KEY,
  name       TEXT NOT NULL UNIQUE,
  superadmin INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL
);

CREATE TABLE api_keys (
  id            TEXT PRIMARY KEY,
  org_id        TEXT NOT NULL REFERENCES orgs(id),
  name          TEXT NOT NULL,
  role          TEXT NOT NULL CHECK (role IN ('admin', 'member', 'viewer')),
  secret_sha256 TEXT NOT NULL UNIQUE,
  created_at    TEXT NOT NULL,
  expires_at    TEXT,
  revoked_at    TEXT
);
CREATE INDEX api_keys_by_org ON api_keys (org_id, id);

CREATE TABLE sandboxes (
  id            TEXT PRIMARY KEY,
  org_id        TEXT NOT NULL REFERENCES orgs(id),
  name          TEXT,
  state         TEXT NOT NULL,
  snapshot      TEXT NOT NULL,
  spec_json     TEXT NOT NULL,
  container_id  TEXT NOT NULL DEFAULT '',
  error_message TEXT NOT NULL DEFAULT '',
  created_at    TEXT NOT NULL,
  updated_at    TEXT NOT NULL,
  expires_at    TEXT
);
-- A name is taken only while its sandbox exists; deleted rows stay for the audit trail.
CREATE UNIQUE INDEX sandboxes_live_name ON sandboxes (org_id, name)
  WHERE name IS NOT NULL AND state <> 'deleted';
CREATE INDEX sandboxes_by_org ON sandboxes (org_id, id);
)sql";

// The network: each sandbox's proxy credential (only its SHA-256), the key its preview tokens
// are made with, and its address on the sandbox network (for the preview router).
constexpr const char* v2_sql = R"sql(
ALTER TABLE sandboxes ADD COLUMN proxy_secret_sha256 TEXT NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN preview_key TEXT NOT NULL DEFAULT '';
ALTER TABLE sandboxes ADD COLUMN address TEXT NOT NULL DEFAULT '';
)sql";

// Identity: an organization's life cycle (a deleted one keeps its row, its name and, later, its
// closed audit chain) and when each API key was last used.
constexpr const char* v3_sql = R"sql(
ALTER TABLE orgs ADD COLUMN state TEXT NOT NULL DEFAULT 'active'
  CHECK (state IN ('active', 'disabled', 'deleting', 'deleted'));
ALTER TABLE orgs ADD COLUMN state_changed_at TEXT;
ALTER TABLE api_keys ADD COLUMN last_used_at TEXT;
)sql";

result<void> seed_instance_id(sqlite3* db) {
  auto st = statement::prepare(db, "INSERT INTO meta (key, value) VALUES ('instance_id', ?1)");
  if (!st) return std::move(st).err();
  st->bind(1, random_hex(8));
  return st->run();
}

}  // namespace

const std::vector<migration>& migrations() {
  static const std::vector<migration> all = {
      {1, v1_sql, &seed_instance_id},
      {2, v2_sql},
      {3, v3_sql},
  };
  return all;
}

}  // namespace sandfort::store::detail
