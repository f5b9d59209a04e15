// The checkpointer against a real SQLite store: what it signs, when it refuses, and its export file.

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "sandfort/audit/checkpoint.hpp"
#include "sandfort/audit/checkpointer.hpp"
#include "sandfort/audit/verifier.hpp"
#include "support.hpp"
#include "support/manual_clock.hpp"

using namespace sandfort;
using namespace sandfort::testing;

namespace {

struct fixture {
  testing::temp_dir dir;
  std::unique_ptr<store::database> db = store::database::open(dir.file("sandfort.db")).value();
  audit::signing_key key = load_key(dir.file("audit.key"));
  audit::public_key pk = *audit::public_key::from_pem(key.public_key_pem());
  testing::manual_clock clk{time_point(std::chrono::seconds(1'767'322'800))};  // 2026-01-02T03:00:00Z
  std::map<std::string, audit::chain_head> heads;

  // Appends n sealed events to org's chain, as the journal does.
  void append(const std::string& org, int n) {
    auto& head = heads[org];
    for (int i = 0; i < n; ++i) {
      auto e = testing::sample_event(org, static_cast<int>(head.seq) + 1);
      REQUIRE(audit::seal(e, head));
      REQUIRE(store::audit_store(*db).insert_audit_event(e));
      head = {e.seq, e.hash};
    }
  }

  std::vector<audit::checkpoint_record> stored(const std::string& org) {
    return store::audit_store(*db).list_audit_checkpoints(org, -1, 1000).value();
  }

  audit::verify_report verify(const std::string& org) {
    const auto cps = stored(org);
    audit::chain_verifier v(org, cps);
    REQUIRE(store::audit_store(*db).scan_audit_events(org, 1, [&](const audit::event_record& e) { return v.feed(e); }));
    return v.finish(cps, pk);
  }
};

}  // namespace

TEST_CASE("checkpoint_org signs the head when it moved, and only then") {
  fixture f;
  // An empty chain has nothing to sign.
  auto none = audit::checkpoint_org(*f.db, org_a, f.key, "2026-01-02T03:00:00.000Z");
  REQUIRE(none);
  CHECK_FALSE(*none);
  CHECK(f.stored(org_a).empty());

  f.append(org_a, 3);
  auto first = audit::checkpoint_org(*f.db, org_a, f.key, "2026-01-02T03:05:00.000Z");
  REQUIRE(first);
  REQUIRE(*first);
  const auto& c = **first;
  CHECK(c.org_id == org_a);
  CHECK(c.seq == 3);
  CHECK(c.head_hash == f.heads[org_a].hash);
  CHECK(c.ts == "2026-01-02T03:05:00.000Z");
  CHECK(c.key_id == f.key.key_id());
  CHECK(f.pk.verify(audit::checkpoint_message(c), c.signature));
  REQUIRE(f.stored(org_a).size() == 1);
  CHECK(f.stored(org_a)[0].signature == c.signature);

  auto again = audit::checkpoint_org(*f.db, org_a, f.key, "2026-01-02T03:10:00.000Z");
  REQUIRE(again);
  CHECK_FALSE(*again);
  CHECK(f.stored(org_a).size() == 1);

  f.append(org_a, 2);
  auto second = audit::checkpoint_org(*f.db, org_a, f.key, "2026-01-02T03:15:00.000Z");
  REQUIRE(second);
  REQUIRE(*second);
  CHECK((*second)->seq == 5);
  CHECK((*second)->head_hash == f.heads[org_a].hash);
  CHECK(f.stored(org_a).size() == 2);
  const auto report = f.verify(org_a);
  CHECK(report.ok);
  CHECK(report.events == 5);
  CHECK(report.checkpoints == 2);
}

TEST_CASE("checkpoint_all signs every organization with new events and exports each checkpoint once") {
  fixture f;
  const auto export_path = f.dir.file("checkpoints.jsonl");
  f.append(org_a, 4);
  f.append(org_b, 1);
  auto made = audit::checkpoint_all(*f.db, f.key, f.clk, export_path);
  REQUIRE(made);
  CHECK(*made == 2);

  struct stat st {};
  REQUIRE(::stat(export_path.c_str(), &st) == 0);
  CHECK((st.st_mode & 07777) == 0600);
  auto exported = audit::read_checkpoint_file(export_path);
  REQUIRE(exported);
  REQUIRE(exported->size() == 2);
  for (const auto& c : *exported) {
    const auto in_db = f.stored(c.org_id);
    REQUIRE(in_db.size() == 1);
    CHECK(audit::checkpoint_json(c) == audit::checkpoint_json(in_db[0]));
    CHECK(c.ts == "2026-01-02T03:00:00.000Z");
  }

  // Nothing moved: nothing signed, nothing appended.
  const auto before = read_file(export_path);
  made = audit::checkpoint_all(*f.db, f.key, f.clk, export_path);
  REQUIRE(made);
  CHECK(*made == 0);
  CHECK(read_file(export_path) == before);

  f.append(org_b, 2);
  f.clk.t += std::chrono::minutes(5);
  made = audit::checkpoint_all(*f.db, f.key, f.clk, export_path);
  REQUIRE(made);
  CHECK(*made == 1);
  exported = audit::read_checkpoint_file(export_path);
  REQUIRE(exported);
  REQUIRE(exported->size() == 3);
  CHECK(exported->back().org_id == org_b);
  CHECK(exported->back().seq == 3);
  CHECK(exported->back().ts == "2026-01-02T03:05:00.000Z");
  CHECK(read_file(export_path).rfind(before, 0) == 0);  // appended, never rewritten
}

TEST_CASE("the checkpointer refuses to sign a chain that no longer extends its latest checkpoint") {
  fixture f;
  f.append(org_a, 3);
  REQUIRE(audit::checkpoint_org(*f.db, org_a, f.key, "2026-01-02T03:00:00.000Z"));

  SECTION("an event that does not chain onto the checkpointed head") {
    auto e = testing::sample_event(org_a, 4);
    REQUIRE(audit::seal(e, audit::chain_head{3, std::string(64, 'f')}));
    REQUIRE(store::audit_store(*f.db).insert_audit_event(e));
    auto r = audit::checkpoint_org(*f.db, org_a, f.key, "2026-01-02T03:05:00.000Z");
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::conflict);
    CHECK(r.err().message.find("seq 4") != std::string::npos);
    CHECK(r.err().message.find("does not extend the latest checkpoint") != std::string::npos);
  }
  SECTION("an event edited after it was sealed") {
    f.append(org_a, 1);
    auto e = testing::sample_event(org_a, 5);
    REQUIRE(audit::seal(e, f.heads[org_a]));
    e.actor = "key-someone-else";
    REQUIRE(store::audit_store(*f.db).insert_audit_event(e));
    auto r = audit::checkpoint_org(*f.db, org_a, f.key, "2026-01-02T03:05:00.000Z");
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::conflict);
    CHECK(r.err().message.find("seq 5") != std::string::npos);
    CHECK(r.err().message.find("hash does not match") != std::string::npos);
  }
  SECTION("a gap after the checkpoint") {
    auto e = testing::sample_event(org_a, 5);
    REQUIRE(audit::seal(e, audit::chain_head{4, std::string(64, 'e')}));
    REQUIRE(store::audit_store(*f.db).insert_audit_event(e));
    auto r = audit::checkpoint_org(*f.db, org_a, f.key, "2026-01-02T03:05:00.000Z");
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::conflict);
    CHECK(r.err().message.find("seq 4 (missing)") != std::string::npos);
  }
  SECTION("a latest checkpoint forged with another key") {
    const auto other = load_key(f.dir.file("other.key"));
    f.append(org_a, 1);
    REQUIRE(
        store::audit_store(*f.db).insert_audit_checkpoint(audit::make_checkpoint(org_a, f.heads[org_a], "t", other)));
    f.append(org_a, 1);
    auto r = audit::checkpoint_org(*f.db, org_a, f.key, "2026-01-02T03:05:00.000Z");
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::conflict);
    CHECK(r.err().message.find("names key " + other.key_id()) != std::string::npos);
  }
  SECTION("a latest checkpoint with this key's id but no valid signature") {
    f.append(org_a, 1);
    auto forged = audit::make_checkpoint(org_a, f.heads[org_a], "t", f.key);
    forged.ts = "2026-01-02T03:01:00.000Z";  // the signature was over another time
    REQUIRE(store::audit_store(*f.db).insert_audit_checkpoint(forged));
    f.append(org_a, 1);
    auto r = audit::checkpoint_org(*f.db, org_a, f.key, "2026-01-02T03:05:00.000Z");
    REQUIRE_FALSE(r);
    CHECK(r.err().code == errc::conflict);
    CHECK(r.err().message.find("invalid signature") != std::string::npos);
  }
  // Whatever was refused, nothing new was signed over it.
  for (const auto& c : f.stored(org_a)) CHECK(c.seq <= 4);
}

TEST_CASE("one organization's broken chain does not stop the others' checkpoints") {
  fixture f;
  f.append(org_a, 2);
  REQUIRE(audit::checkpoint_org(*f.db, org_a, f.key, "t0"));
  auto e = testing::sample_event(org_a, 3);
  REQUIRE(audit::seal(e, audit::chain_head{2, std::string(64, 'f')}));
  REQUIRE(store::audit_store(*f.db).insert_audit_event(e));
  f.append(org_b, 2);

  auto made = audit::checkpoint_all(*f.db, f.key, f.clk, "");
  REQUIRE_FALSE(made);
  CHECK(made.err().message.find(org_a) != std::string::npos);
  CHECK(made.err().message.find("1 checkpoints made") != std::string::npos);
  REQUIRE(f.stored(org_b).size() == 1);
  CHECK(f.stored(org_b)[0].seq == 2);
}

TEST_CASE("a checkpoint that cannot be exported is not stored, so the next round signs it again") {
  fixture f;
  f.append(org_a, 2);
  const auto unreachable = f.dir.file("no-such-dir/checkpoints.jsonl");
  auto r = audit::checkpoint_org(*f.db, org_a, f.key, "t0", unreachable);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::internal);
  CHECK(r.err().message.find(unreachable) != std::string::npos);
  CHECK(f.stored(org_a).empty());

  const auto export_path = f.dir.file("checkpoints.jsonl");
  r = audit::checkpoint_org(*f.db, org_a, f.key, "t1", export_path);
  REQUIRE(r);
  REQUIRE(*r);
  CHECK((*r)->seq == 2);
  auto exported = audit::read_checkpoint_file(export_path);
  REQUIRE(exported);
  REQUIRE(exported->size() == 1);
  CHECK(exported->front().signature == (*r)->signature);
}

TEST_CASE("read_checkpoint_file names the line it cannot read") {
  testing::temp_dir dir;
  const auto path = dir.file("cp.jsonl");
  const std::string good =
      R"({"org_id":"org-1","seq":3,"head_hash":"ab","ts":"t","key_id":"k","signature":"c2ln"})";
  std::ofstream(path, std::ios::binary) << good << "\n\n" << good << "\r\n" << R"({"org_id":"org-1","seq":"3"})" << "\n";
  auto r = audit::read_checkpoint_file(path);
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::invalid_argument);
  CHECK(r.err().message.find(path + ":4: checkpoint field 'head_hash'") != std::string::npos);

  std::ofstream(path, std::ios::binary) << good << "\n" << good << "\r\n";
  r = audit::read_checkpoint_file(path);
  REQUIRE(r);
  REQUIRE(r->size() == 2);
  CHECK(r->at(1).seq == 3);
  CHECK(r->at(1).signature == "c2ln");

  std::ofstream(path, std::ios::binary) << "{not json\n";
  r = audit::read_checkpoint_file(path);
  REQUIRE_FALSE(r);
  CHECK(r.err().message.find(path + ":1: not JSON") != std::string::npos);

  CHECK(audit::read_checkpoint_file(dir.file("missing")).err().code == errc::not_found);
}

TEST_CASE("signing_key::load reads an existing key and never creates one") {
  testing::temp_dir dir;
  const auto path = dir.file("audit.key");
  auto missing = audit::signing_key::load(path);
  REQUIRE_FALSE(missing);
  CHECK(missing.err().code == errc::not_found);
  CHECK_FALSE(std::filesystem::exists(path));

  const auto created = load_key(path);
  auto loaded = audit::signing_key::load(path);
  REQUIRE(loaded);
  CHECK(loaded->key_id() == created.key_id());
  REQUIRE(::chmod(path.c_str(), 0640) == 0);
  CHECK(audit::signing_key::load(path).err().code == errc::permission_denied);
}
