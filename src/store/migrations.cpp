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

// Audit: each organization's hash chain and its signed checkpoints. No foreign key to orgs, on
// purpose: the chain is evidence and outlives the organization's row state. A key would refuse an
// event for an organization whose row is gone or never committed, and would force a future purge
// of deleted organizations to destroy or orphan their chains; audit-verify walks audit_org_ids(),
// not orgs. Rows are written once and never updated by the daemon.
// Indexes: the primary key serves the head, cursors and scans; the others let a filtered page
// read only what its filter selects (WITHOUT ROWID: each one ends in the key, org_id and seq).
constexpr const char* v4_sql = R"sql(
CREATE TABLE audit_events (
  org_id     TEXT NOT NULL,
  seq        INTEGER NOT NULL CHECK (seq >= 1),
  ts         TEXT NOT NULL,
  actor      TEXT NOT NULL,
  action     TEXT NOT NULL,
  target     TEXT NOT NULL DEFAULT '',
  outcome    TEXT NOT NULL,
  request_id TEXT NOT NULL DEFAULT '',
  source     TEXT NOT NULL DEFAULT '',
  details    TEXT NOT NULL DEFAULT '{}',
  prev_hash  TEXT NOT NULL,
  hash       TEXT NOT NULL,
  PRIMARY KEY (org_id, seq)
) WITHOUT ROWID;
CREATE INDEX audit_by_ts ON audit_events (org_id, ts);
CREATE INDEX audit_by_actor ON audit_events (org_id, actor, seq);
CREATE INDEX audit_by_action ON audit_events (org_id, action, seq);
CREATE INDEX audit_by_target ON audit_events (org_id, target, seq);

CREATE TABLE audit_checkpoints (
  org_id    TEXT NOT NULL,
  seq       INTEGER NOT NULL,
  head_hash TEXT NOT NULL,
  ts        TEXT NOT NULL,
  key_id    TEXT NOT NULL,
  signature TEXT NOT NULL,
  PRIMARY KEY (org_id, seq)
) WITHOUT ROWID;
)sql";

// Guardrails (docs/guardrails.md): an organization's own limits (NULL: the configured default)
// and its kill switch; and when a sandbox a guardrail stopped (TTL, idle) is to be deleted.
constexpr const char* v5_sql = R"sql(
CREATE TABLE org_guardrails (
  org_id                TEXT PRIMARY KEY REFERENCES orgs(id),
  max_sandboxes         INTEGER,
  max_millicpus         INTEGER,
  max_memory_mb         INTEGER,
  allowed_images        TEXT,
  stopped_since         TEXT,
  stopped_by_superadmin INTEGER NOT NULL DEFAULT 0,
  updated_at            TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE sandbox_deadlines (
  sandbox_id   TEXT PRIMARY KEY REFERENCES sandboxes(id),
  org_id       TEXT NOT NULL,
  delete_after TEXT NOT NULL,
  reason       TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX sandbox_deadlines_by_time ON sandbox_deadlines (delete_after);
)sql";

// History: a deleted sandbox's row stays until pruned (store.deleted_retention_s), so nothing a
// request does may walk deleted rows. Live rows get their own partial indexes (lists, the reaper,
// by name: sandboxes_live_name above); deleted ones an index by deletion time (a deleted row is
// final, so updated_at is when it was deleted) for pruning oldest first.
// Labels: the `labels` object of spec_json, one row per label of each live sandbox, kept by
// triggers in the statement that writes the sandbox row (so a row and its labels never disagree,
// whoever writes it). A sandbox's labels go when it is deleted: the table holds live sandboxes
// only, and a label search reads only matching live sandboxes. No foreign key: the triggers are
// the only writers, and a key would cost a lookup per label and per pruned row.
constexpr const char* v6_sql = R"sql(
CREATE INDEX sandboxes_live_by_org ON sandboxes (org_id, id) WHERE state <> 'deleted';
CREATE INDEX sandboxes_deleted_at ON sandboxes (updated_at) WHERE state = 'deleted';

CREATE TABLE sandbox_labels (
  sandbox_id TEXT NOT NULL,
  key        TEXT NOT NULL,
  value      TEXT NOT NULL,
  org_id     TEXT NOT NULL,
  PRIMARY KEY (sandbox_id, key)
) WITHOUT ROWID;
CREATE INDEX sandbox_labels_by_value ON sandbox_labels (org_id, key, value, sandbox_id);

CREATE TRIGGER sandbox_labels_on_insert AFTER INSERT ON sandboxes WHEN new.state <> 'deleted'
BEGIN
  INSERT OR REPLACE INTO sandbox_labels (sandbox_id, key, value, org_id)
    SELECT new.id, j.key, j.value, new.org_id
    FROM json_each(CASE WHEN json_valid(new.spec_json) THEN new.spec_json ELSE '{}' END, '$.labels') AS j
    WHERE j.type = 'text' AND typeof(j.key) = 'text';
END;

CREATE TRIGGER sandbox_labels_on_update AFTER UPDATE OF spec_json, state ON sandboxes
  WHEN old.spec_json IS NOT new.spec_json OR (old.state = 'deleted') <> (new.state = 'deleted')
BEGIN
  DELETE FROM sandbox_labels WHERE sandbox_id = old.id;
  INSERT OR REPLACE INTO sandbox_labels (sandbox_id, key, value, org_id)
    SELECT new.id, j.key, j.value, new.org_id
    FROM json_each(CASE WHEN json_valid(new.spec_json) THEN new.spec_json ELSE '{}' END, '$.labels') AS j
    WHERE new.state <> 'deleted' AND j.type = 'text' AND typeof(j.key) = 'text';
END;

-- A deleted row has no labels left: pruning costs no lookup here.
CREATE TRIGGER sandbox_labels_on_delete AFTER DELETE ON sandboxes WHEN old.state <> 'deleted'
BEGIN
  DELETE FROM sandbox_labels WHERE sandbox_id = old.id;
END;

-- A deadline left behind by a deleted sandbox goes with its row (it would block the delete).
CREATE TRIGGER sandbox_deadlines_on_delete AFTER DELETE ON sandboxes
BEGIN
  DELETE FROM sandbox_deadlines WHERE sandbox_id = old.id;
END;

INSERT OR REPLACE INTO sandbox_labels (sandbox_id, key, value, org_id)
  SELECT s.id, j.key, j.value, s.org_id
  FROM sandboxes AS s INDEXED BY sandboxes_live_by_org,
       json_each(CASE WHEN json_valid(s.spec_json) THEN s.spec_json ELSE '{}' END, '$.labels') AS j
  WHERE s.state <> 'deleted' AND j.type = 'text' AND typeof(j.key) = 'text';
)sql";

// Volumes: an organization's named volumes (the Docker volume's random name is stored here and
// nowhere else ties it to the organization), and which sandboxes mount which. A sandbox's mounts
// go when it is deleted (or its row pruned), so "is this volume mounted" reads only live
// sandboxes' rows, through sandbox_volumes_by_volume.
constexpr const char* v7_sql = R"sql(
CREATE TABLE volumes (
  id          TEXT PRIMARY KEY,
  org_id      TEXT NOT NULL REFERENCES orgs(id),
  name        TEXT NOT NULL,
  docker_name TEXT NOT NULL UNIQUE,
  size_mb     INTEGER,
  state       TEXT NOT NULL CHECK (state IN ('ready', 'deleting', 'deleted')),
  created_at  TEXT NOT NULL,
  updated_at  TEXT NOT NULL
);
CREATE UNIQUE INDEX volumes_live_name ON volumes (org_id, name) WHERE state <> 'deleted';

CREATE TABLE sandbox_volumes (
  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id),
  volume_id  TEXT NOT NULL REFERENCES volumes(id),
  mount_path TEXT NOT NULL,
  read_only  INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (sandbox_id, volume_id)
) WITHOUT ROWID;
CREATE INDEX sandbox_volumes_by_volume ON sandbox_volumes (volume_id, sandbox_id);

CREATE TRIGGER sandbox_volumes_on_sandbox_deleted AFTER UPDATE OF state ON sandboxes
  WHEN new.state = 'deleted' AND old.state <> 'deleted'
BEGIN
  DELETE FROM sandbox_volumes WHERE sandbox_id = old.id;
END;

CREATE TRIGGER sandbox_volumes_on_sandbox_delete AFTER DELETE ON sandboxes
BEGIN
  DELETE FROM sandbox_volumes WHERE sandbox_id = old.id;
END;
)sql";

// Snapshots: an organization's committed sandbox filesystems. The image's random Docker name is
// stored here and nowhere else ties it to the organization or the name. Sandboxes created from
// one keep its image in their `snapshot` column: sandboxes_live_by_snapshot answers "is this
// snapshot in use" with one index lookup.
constexpr const char* v8_sql = R"sql(
CREATE TABLE snapshots (
  id                TEXT PRIMARY KEY,
  org_id            TEXT NOT NULL REFERENCES orgs(id),
  name              TEXT NOT NULL,
  image_ref         TEXT NOT NULL UNIQUE,
  size_bytes        INTEGER NOT NULL DEFAULT 0,
  source_sandbox_id TEXT NOT NULL,
  state             TEXT NOT NULL CHECK (state IN ('ready', 'deleting', 'deleted')),
  created_at        TEXT NOT NULL,
  updated_at        TEXT NOT NULL
);
CREATE UNIQUE INDEX snapshots_live_name ON snapshots (org_id, name) WHERE state <> 'deleted';
CREATE INDEX sandboxes_live_by_snapshot ON sandboxes (snapshot) WHERE state <> 'deleted';
)sql";

// Guardrails for volumes and snapshots: an organization's own quotas of each (NULL: the
// configured default, guardrails.max_volumes / max_snapshots). Existing rows keep their limits
// and get NULL here, that is the default. What the quotas count is read through the live-only
// indexes volumes_live_name and snapshots_live_name (versions 7 and 8): no new index.
constexpr const char* v9_sql = R"sql(
ALTER TABLE org_guardrails ADD COLUMN max_volumes INTEGER;
ALTER TABLE org_guardrails ADD COLUMN max_snapshots INTEGER;
)sql";

// An organization's quota on the disk_mb of its sandboxes together (docs/guardrails.md).
constexpr const char* v10_sql = R"sql(
ALTER TABLE org_guardrails ADD COLUMN max_disk_mb INTEGER;
)sql";

// The E2B-compatible sandbox plane's credentials (docs/e2b.md): access tokens minted when a
// sandbox is made or connected to through /e2b, each shown once; only their SHA-256 is kept. They
// go with their sandbox's row (prune) and open nothing once it is deleted (the lookup joins live
// sandboxes only).
constexpr const char* v11_sql = R"sql(
CREATE TABLE e2b_access_tokens (
  token_sha256 TEXT PRIMARY KEY,
  sandbox_id   TEXT NOT NULL REFERENCES sandboxes(id) ON DELETE CASCADE,
  created_at   TEXT NOT NULL
);
CREATE INDEX e2b_access_tokens_by_sandbox ON e2b_access_tokens (sandbox_id, created_at);
)sql";

// An organization's runtime policy (docs/guardrails.md, "Runtime policy"): a JSON array of the
// runtimes its sandboxes may run on; NULL, as for every existing row, is the configured default.
constexpr const char* v12_sql = R"sql(
ALTER TABLE org_guardrails ADD COLUMN allowed_runtimes TEXT;
)sql";

// Console sign-ins (docs/console.md): the SHA-256 of each session cookie, never the cookie. A
// session made with an API key names that key by its SHA-256 and is worth exactly what the key is
// on every request (revoked, expired or its organization disabled: the session opens nothing);
// one made through the identity provider holds the principal it proved, as JSON, until it expires.
constexpr const char* v13_sql = R"sql(
CREATE TABLE console_sessions (
  id_sha256   TEXT PRIMARY KEY,
  credential  TEXT NOT NULL,
  key_sha256  TEXT,
  identity    TEXT,
  csrf_token  TEXT NOT NULL,
  created_at  TEXT NOT NULL,
  expires_at  TEXT NOT NULL
);
CREATE INDEX console_sessions_by_credential ON console_sessions (credential, created_at);
CREATE INDEX console_sessions_by_expiry ON console_sessions (expires_at);
)sql";

// Console sign-ins through an identity provider that have begun and not ended (docs/console.md):
// one row per visit to the provider, found by the SHA-256 of its `state`, bound to the browser by
// the SHA-256 of its pre-login cookie, used once and kept 5 minutes at most. `source` is the
// client address, so that one address cannot fill the table for everyone.
constexpr const char* v14_sql = R"sql(
CREATE TABLE console_logins (
  state_sha256   TEXT PRIMARY KEY,
  browser_sha256 TEXT NOT NULL,
  issuer         TEXT NOT NULL,
  redirect_uri   TEXT NOT NULL,
  code_verifier  TEXT NOT NULL,
  nonce          TEXT NOT NULL,
  source         TEXT NOT NULL,
  created_at     TEXT NOT NULL,
  expires_at     TEXT NOT NULL
);
CREATE INDEX console_logins_by_source ON console_logins (source, created_at);
CREATE INDEX console_logins_by_expiry ON console_logins (expires_at);
)sql";

// An organization's egress defaults (docs/egress.md): the policy of its sandboxes created without
// one of their own, JSON; NULL, as for every existing row, is none.
constexpr const char* v15_sql = R"sql(
ALTER TABLE org_guardrails ADD COLUMN egress_defaults TEXT;
)sql";

// Organization secrets (docs/secrets.md): each value sealed with AES-256-GCM under the key file
// (`secrets.key_file`), never in the clear; `key_id` names the key that sealed it. `hosts` and
// `placement` are JSON. And each organization's interception CA: its certificate, and its
// private key sealed the same way. Both go with their organization when it is deleted.
constexpr const char* v16_sql = R"sql(
CREATE TABLE secrets (
  org_id       TEXT NOT NULL REFERENCES orgs(id),
  name         TEXT NOT NULL,
  sealed_value TEXT NOT NULL,
  key_id       TEXT NOT NULL,
  hosts        TEXT NOT NULL,
  placement    TEXT NOT NULL,
  version      INTEGER NOT NULL,
  created_at   TEXT NOT NULL,
  updated_at   TEXT NOT NULL,
  PRIMARY KEY (org_id, name)
) WITHOUT ROWID;
CREATE TABLE interception_cas (
  org_id          TEXT PRIMARY KEY REFERENCES orgs(id),
  certificate_pem TEXT NOT NULL,
  sealed_key      TEXT NOT NULL,
  key_id          TEXT NOT NULL,
  created_at      TEXT NOT NULL
);
)sql";

// The audit rows that are life-cycle events (docs/events.md), so that following the event stream
// or a webhook from an old cursor reads only them, never the exec and file rows between. The
// predicate is repeated word for word where the events are read (src/store/audit.cpp): SQLite
// uses a partial index only for a query that contains its WHERE term as written.
constexpr const char* v17_sql = R"sql(
CREATE INDEX audit_lifecycle ON audit_events (org_id, seq)
  WHERE action IN ('sandbox.create', 'sandbox.start', 'sandbox.stop', 'sandbox.pause', 'sandbox.resume',
                   'sandbox.delete', 'sandbox.state', 'snapshot.create', 'snapshot.delete', 'volume.create',
                   'volume.delete', 'rate_limit.exceeded', 'egress') OR action GLOB 'guardrail.*';
)sql";

// Webhooks (docs/events.md, "Webhooks"): an organization's receivers of its life-cycle events.
// The outbox is the audit chain itself: `cursor` is the last seq a webhook has taken from it,
// and webhook_deliveries holds each event taken (at most one `pending` per webhook: deliveries are
// in order) and, until log_retention_s after it finished, its outcome — the delivery log. The
// signing secret is sealed like a secret value; after a rotation the previous one may sign too,
// until previous_until_ms. Both go with their organization when it is deleted.
constexpr const char* v18_sql = R"sql(
CREATE TABLE webhooks (
  org_id        TEXT NOT NULL REFERENCES orgs(id),
  id            TEXT NOT NULL,
  url           TEXT NOT NULL,
  types         TEXT NOT NULL,
  description   TEXT NOT NULL,
  enabled       INTEGER NOT NULL,
  sealed_secret TEXT NOT NULL,
  key_id        TEXT NOT NULL,
  cursor        INTEGER NOT NULL,
  created_at    TEXT NOT NULL,
  updated_at    TEXT NOT NULL,
  previous_secret   TEXT,
  previous_until_ms INTEGER,
  PRIMARY KEY (org_id, id)
) WITHOUT ROWID;
CREATE TABLE webhook_deliveries (
  org_id          TEXT NOT NULL,
  webhook_id      TEXT NOT NULL,
  seq             INTEGER NOT NULL,
  type            TEXT NOT NULL,
  state           TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
  attempts        INTEGER NOT NULL,
  last_status     INTEGER,
  last_error      TEXT NOT NULL,
  next_attempt_ms INTEGER,
  created_at      TEXT NOT NULL,
  finished_ms     INTEGER,
  delivered_at    TEXT,
  PRIMARY KEY (org_id, webhook_id, seq)
) WITHOUT ROWID;
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (org_id, webhook_id, seq) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (finished_ms) WHERE finished_ms IS NOT NULL;
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
      {4, v4_sql},
      {5, v5_sql},
      {6, v6_sql},
      {7, v7_sql},
      {8, v8_sql},
      {9, v9_sql},
      {10, v10_sql},
      {11, v11_sql},
      {12, v12_sql},
      {13, v13_sql},
      {14, v14_sql},
      {15, v15_sql},
      {16, v16_sql},
      {17, v17_sql},
      {18, v18_sql},
  };
  return all;
}

}  // namespace sandfort::store::detail
