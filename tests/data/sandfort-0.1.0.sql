-- A sandfortd database as release 0.1.0 (schema version 9) left it: the superadmin, an
-- organization "upgraded" with an admin key, a stopped sandbox "old-one" (label team=a), a volume
-- "data", their audit events and a signed checkpoint (key: sandfort-0.1.0-audit-signing.key).
-- tests/integration/test_upgrade.py starts today's daemon on it. Made with
-- `sqlite3 sandfort.db .dump`, plus the schema version, which .dump leaves out.
PRAGMA user_version=9;
PRAGMA foreign_keys=OFF;
BEGIN TRANSACTION;
CREATE TABLE meta (
  key   TEXT PRIMARY KEY,
  value TEXT NOT NULL
);
INSERT INTO meta VALUES('instance_id','648bc6a3416047fe');
CREATE TABLE orgs (
  id         TEXT PRIMARY KEY,
  name       TEXT NOT NULL UNIQUE,
  superadmin INTEGER NOT NULL DEFAULT 0,
  created_at TEXT NOT NULL
, state TEXT NOT NULL DEFAULT 'active'
  CHECK (state IN ('active', 'disabled', 'deleting', 'deleted')), state_changed_at TEXT);
INSERT INTO orgs VALUES('org-b119c0456b9e7aaa','superadmin',1,'2026-12-01T18:18:37.605Z','active',NULL);
INSERT INTO orgs VALUES('org-6018adca3cff98b9','upgraded',0,'2026-12-01T18:18:38.065Z','active',NULL);
CREATE TABLE api_keys (
  id            TEXT PRIMARY KEY,
  org_id        TEXT NOT NULL REFERENCES orgs(id),
  name          TEXT NOT NULL,
  role          TEXT NOT NULL CHECK (role IN ('admin', 'member', 'viewer')),
  secret_sha256 TEXT NOT NULL UNIQUE,
  created_at    TEXT NOT NULL,
  expires_at    TEXT,
  revoked_at    TEXT
, last_used_at TEXT);
INSERT INTO api_keys VALUES('key-b85f9da44b13d656','org-b119c0456b9e7aaa','bootstrap','admin','9a2338251383d94943a70bac002754db532c12c30386564b27238948f52a822e','2026-12-01T18:18:37.606Z',NULL,NULL,'2026-12-01T18:18:38.054Z');
INSERT INTO api_keys VALUES('key-b87eb0e0e1ab1b80','org-6018adca3cff98b9','kept','admin','97d2cdaed2e07c33f2c04beb15ae7ba4bf13694e4916fd1c962021e94383bb79','2026-12-01T18:18:38.070Z',NULL,NULL,'2026-12-01T18:18:38.074Z');
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
, proxy_secret_sha256 TEXT NOT NULL DEFAULT '', preview_key TEXT NOT NULL DEFAULT '', address TEXT NOT NULL DEFAULT '');
INSERT INTO sandboxes VALUES('sbx-3b54ebb80b046d07','org-6018adca3cff98b9','old-one','stopped','sandfort/base:bookworm','{"egress_allowlist":[],"env":{},"idle_timeout_s":1800,"labels":{"team":"a"},"public_preview":false,"resources":{"cpus":1.0,"memory_mb":1024,"pids":512},"user":"","workdir":""}','225e71fa13b1fe065dd972d80477221a2f9e7ccce85a5b5532c6db02d1ab2b2d','','2026-12-01T18:18:38.075Z','2026-12-01T18:18:38.909Z',NULL,'a2d414b72da9730642fcc62f8096695aed93bec13fa53e6320bea9d09427dc5e','37f5000c72c7f6ecf40c09e54341cabd3e54d163d19db70200c76c0c7a2a473c','');
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
INSERT INTO audit_events VALUES('org-6018adca3cff98b9',1,'2026-12-01T18:18:38.066Z','key:key-b85f9da44b13d656','org.create','org-6018adca3cff98b9','ok','req-a97dc2718010d71c','127.0.0.1','{"name":"upgraded"}','0000000000000000000000000000000000000000000000000000000000000000','813edc2cd269e630d6ddbf274b9c25e35b825596cb801ec43f4e83cd0ae4533e');
INSERT INTO audit_events VALUES('org-6018adca3cff98b9',2,'2026-12-01T18:18:38.070Z','key:key-b85f9da44b13d656','api_key.create','key-b87eb0e0e1ab1b80','ok','req-d95c6e27abc76226','127.0.0.1','{"expires_at":null,"name":"kept","org_id":"org-6018adca3cff98b9","role":"admin"}','813edc2cd269e630d6ddbf274b9c25e35b825596cb801ec43f4e83cd0ae4533e','05f6023db3044dc24ac2b0424351063fc60bc05ee4f06bfb96b33ce7df66fc75');
INSERT INTO audit_events VALUES('org-6018adca3cff98b9',3,'2026-12-01T18:18:38.075Z','key:key-b87eb0e0e1ab1b80','sandbox.create','sbx-3b54ebb80b046d07','ok','req-bc9b01a54072ceb4','127.0.0.1','{"name":"old-one","snapshot":"sandfort/base:bookworm","spec":{"egress_allowlist":[],"env":[],"idle_timeout_s":1800,"labels":{"team":"a"},"public_preview":false,"resources":{"cpus":"1.0","memory_mb":1024,"pids":512},"user":"","workdir":""}}','05f6023db3044dc24ac2b0424351063fc60bc05ee4f06bfb96b33ce7df66fc75','b8b77512cdc1c279a9fc478c0ae4e2c811756f8748f40030c04399f8479ba73e');
INSERT INTO audit_events VALUES('org-6018adca3cff98b9',4,'2026-12-01T18:18:38.745Z','system','sandbox.state','sbx-3b54ebb80b046d07','ok','','','{"state":"started"}','b8b77512cdc1c279a9fc478c0ae4e2c811756f8748f40030c04399f8479ba73e','fbcb24e8f7d1d04526922b6235c14dbb917d53508e4acd126c5887dffdb5829b');
INSERT INTO audit_events VALUES('org-6018adca3cff98b9',5,'2026-12-01T18:18:38.751Z','key:key-b87eb0e0e1ab1b80','volume.create','vol-431c6e58626a923b','ok','req-2a66b3ddf87c2784','127.0.0.1','{"name":"data"}','fbcb24e8f7d1d04526922b6235c14dbb917d53508e4acd126c5887dffdb5829b','273bd284529954d659b51fcab3f6d2db478b8eb9f13db08e4c3cb8cf64ba239b');
INSERT INTO audit_events VALUES('org-6018adca3cff98b9',6,'2026-12-01T18:18:38.910Z','key:key-b87eb0e0e1ab1b80','sandbox.stop','sbx-3b54ebb80b046d07','ok','req-e509d250fb0f91aa','127.0.0.1','{"state":"stopped"}','273bd284529954d659b51fcab3f6d2db478b8eb9f13db08e4c3cb8cf64ba239b','efeecccf9340ad0c5670cae5b7b2de807e7cda96135030975d6493667c11b590');
INSERT INTO audit_events VALUES('org-b119c0456b9e7aaa',1,'2026-12-01T18:18:38.066Z','key:key-b85f9da44b13d656','org.create','org-6018adca3cff98b9','ok','req-a97dc2718010d71c','127.0.0.1','{"name":"upgraded"}','0000000000000000000000000000000000000000000000000000000000000000','40539fedd27b88e7a0eaffc53c28fa6a49eea13ca84a366d0204c58630ea72a7');
INSERT INTO audit_events VALUES('org-b119c0456b9e7aaa',2,'2026-12-01T18:18:38.070Z','key:key-b85f9da44b13d656','api_key.create','key-b87eb0e0e1ab1b80','ok','req-d95c6e27abc76226','127.0.0.1','{"expires_at":null,"name":"kept","org_id":"org-6018adca3cff98b9","role":"admin"}','40539fedd27b88e7a0eaffc53c28fa6a49eea13ca84a366d0204c58630ea72a7','d31001e7ec1420440c4a50836aa11c6f972e103a3622d598ea46ac692c8a97f1');
CREATE TABLE audit_checkpoints (
  org_id    TEXT NOT NULL,
  seq       INTEGER NOT NULL,
  head_hash TEXT NOT NULL,
  ts        TEXT NOT NULL,
  key_id    TEXT NOT NULL,
  signature TEXT NOT NULL,
  PRIMARY KEY (org_id, seq)
) WITHOUT ROWID;
INSERT INTO audit_checkpoints VALUES('org-6018adca3cff98b9',6,'efeecccf9340ad0c5670cae5b7b2de807e7cda96135030975d6493667c11b590','2026-12-01T18:18:38.912Z','83bc86b34e22005a','zW8SXnXHEMhZETEi7qShO1gX3sI5GH9VHF/2/VKqmMScWdUYpsL9lz4zoayiHrFKnU2Nb91PJ7T/krpGXxg8Bg==');
INSERT INTO audit_checkpoints VALUES('org-b119c0456b9e7aaa',2,'d31001e7ec1420440c4a50836aa11c6f972e103a3622d598ea46ac692c8a97f1','2026-12-01T18:18:38.913Z','83bc86b34e22005a','jrW44kllQP6iDNye9IBs+dEPzV8x3vmm1YxdBoeL9mr0IuvHh7DgIp1mMTWpuC/Nf5ahYk/3+o86K7tB6egwDw==');
CREATE TABLE org_guardrails (
  org_id                TEXT PRIMARY KEY REFERENCES orgs(id),
  max_sandboxes         INTEGER,
  max_millicpus         INTEGER,
  max_memory_mb         INTEGER,
  allowed_images        TEXT,
  stopped_since         TEXT,
  stopped_by_superadmin INTEGER NOT NULL DEFAULT 0,
  updated_at            TEXT NOT NULL
, max_volumes INTEGER, max_snapshots INTEGER) WITHOUT ROWID;
CREATE TABLE sandbox_deadlines (
  sandbox_id   TEXT PRIMARY KEY REFERENCES sandboxes(id),
  org_id       TEXT NOT NULL,
  delete_after TEXT NOT NULL,
  reason       TEXT NOT NULL
) WITHOUT ROWID;
CREATE TABLE sandbox_labels (
  sandbox_id TEXT NOT NULL,
  key        TEXT NOT NULL,
  value      TEXT NOT NULL,
  org_id     TEXT NOT NULL,
  PRIMARY KEY (sandbox_id, key)
) WITHOUT ROWID;
INSERT INTO sandbox_labels VALUES('sbx-3b54ebb80b046d07','team','a','org-6018adca3cff98b9');
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
INSERT INTO volumes VALUES('vol-431c6e58626a923b','org-6018adca3cff98b9','data','sandfort-vol-2581c709f8717567',NULL,'ready','2026-12-01T18:18:38.746Z','2026-12-01T18:18:38.746Z');
CREATE TABLE sandbox_volumes (
  sandbox_id TEXT NOT NULL REFERENCES sandboxes(id),
  volume_id  TEXT NOT NULL REFERENCES volumes(id),
  mount_path TEXT NOT NULL,
  read_only  INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (sandbox_id, volume_id)
) WITHOUT ROWID;
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
CREATE INDEX api_keys_by_org ON api_keys (org_id, id);
CREATE UNIQUE INDEX sandboxes_live_name ON sandboxes (org_id, name)
  WHERE name IS NOT NULL AND state <> 'deleted';
CREATE INDEX sandboxes_by_org ON sandboxes (org_id, id);
CREATE INDEX audit_by_ts ON audit_events (org_id, ts);
CREATE INDEX audit_by_actor ON audit_events (org_id, actor, seq);
CREATE INDEX audit_by_action ON audit_events (org_id, action, seq);
CREATE INDEX audit_by_target ON audit_events (org_id, target, seq);
CREATE INDEX sandbox_deadlines_by_time ON sandbox_deadlines (delete_after);
CREATE INDEX sandboxes_live_by_org ON sandboxes (org_id, id) WHERE state <> 'deleted';
CREATE INDEX sandboxes_deleted_at ON sandboxes (updated_at) WHERE state = 'deleted';
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
CREATE TRIGGER sandbox_labels_on_delete AFTER DELETE ON sandboxes WHEN old.state <> 'deleted'
BEGIN
  DELETE FROM sandbox_labels WHERE sandbox_id = old.id;
END;
CREATE TRIGGER sandbox_deadlines_on_delete AFTER DELETE ON sandboxes
BEGIN
  DELETE FROM sandbox_deadlines WHERE sandbox_id = old.id;
END;
CREATE UNIQUE INDEX volumes_live_name ON volumes (org_id, name) WHERE state <> 'deleted';
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
CREATE UNIQUE INDEX snapshots_live_name ON snapshots (org_id, name) WHERE state <> 'deleted';
CREATE INDEX sandboxes_live_by_snapshot ON sandboxes (snapshot) WHERE state <> 'deleted';
COMMIT;
