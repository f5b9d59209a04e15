// The one door for image references (src/sandbox/image_resolution.cpp) over the fake engine,
// which, like dockerd, matches a name it does not know as an image-id prefix: no spelling of
// another organization's snapshot image reaches a container, an image present is used by the
// id the name reaches as written, and a container's labels are sandfortd's own.

#include <catch2/catch.hpp>

#include "fakes.hpp"

using namespace sandfort;
using namespace sandfort::sandbox;
using namespace sandfort::sandbox::test;

namespace {

result<snapshot_view> snapshot_of(fixture& f, const std::string& org_id, const std::string& sandbox_id,
                                  const std::string& name) {
  snapshot_create_request req;
  req.sandbox_id = sandbox_id;
  req.name = name;
  return f.run(f.svc->snapshots().create(org_id, req, audit::system_actor()));
}

result<sandbox_view> create_from(fixture& f, const std::string& org_id, const std::string& snapshot, bool wait = true) {
  create_request req;
  req.snapshot = snapshot;
  req.wait = wait;
  return f.create(org_id, req);
}

}  // namespace

TEST_CASE("image door: no spelling of another organization's snapshot image makes a container",
          "[sandbox][images]") {
  fixture f;
  auto box = f.create_started();
  REQUIRE(snapshot_of(f, f.org_a.id, box.id, "snapA"));
  const std::string tag = f.engine.commits.at(0);
  const std::string id = f.engine.image_by_name(tag)->id;  // "sha256:<64 hex>"
  const std::string hex = id.substr(7);
  // A tag someone added on the host.
  f.engine.image_details[id].repo_tags.push_back("innocent:v1");
  f.engine.images.insert("innocent:v1");
  const auto containers = f.engine.created.size();
  struct attempt {
    std::string snapshot;
    errc code;
  };
  for (const auto& [snapshot, code] : std::vector<attempt>{
           {"sha256:" + hex.substr(0, 1), errc::invalid_argument},
           {"sha256:" + hex.substr(0, 12), errc::invalid_argument},
           {id, errc::invalid_argument},
           {hex.substr(0, 12), errc::invalid_argument},
           {hex, errc::invalid_argument},
           {tag, errc::not_found},
           {"docker.io/" + tag, errc::not_found},
           {tag.substr(0, tag.find(':')) + "@" + id, errc::not_found},
           {"innocent:v1", errc::not_found},
           {"docker.io/library/innocent:v1", errc::not_found},
       }) {
    for (bool wait : {true, false}) {
      auto r = create_from(f, f.org_b.id, snapshot, wait);
      INFO(snapshot << (wait ? " (wait)" : ""));
      REQUIRE_FALSE(r);
      CHECK(r.err().code == code);
    }
  }
  CHECK(f.engine.created.size() == containers);
  CHECK(f.engine.pulls.empty());
  auto rows = f.run(f.svc->list(f.org_b.id, {}));
  REQUIRE(rows);
  CHECK(rows->items.empty());
  // The owner: by name and by id, by the image's id; never by the image's names.
  for (const std::string& by : {std::string("snapA"), f.svc->snapshots().get(f.org_a.id, "snapA")->id}) {
    auto made = create_from(f, f.org_a.id, by);
    REQUIRE(made);
    CHECK(f.engine.created.back().image == id);
  }
  CHECK(create_from(f, f.org_a.id, tag).err().code == errc::not_found);
  CHECK(create_from(f, f.org_a.id, "innocent:v1").err().code == errc::not_found);
}

TEST_CASE("image door: an image the engine found by another name than the one written is not used",
          "[sandbox][images]") {
  fixture f;
  // dockerd answers a name it does not know with an image whose id that name prefixes; here
  // for a name the spelling check lets through, so only the check of the answer's names can tell.
  auto& other = f.engine.add_image("private.example/secret:1", {}, f.engine.now_unix);
  f.engine.answered_by["abc123x:latest"] = other.id;
  f.engine.pull_error = make_error(errc::not_found, "pull access denied");
  auto r = create_from(f, f.org_b.id, "abc123x");
  REQUIRE_FALSE(r);
  CHECK(r.err().code == errc::not_found);
  REQUIRE(f.engine.pulls.size() == 1);  // the name as written was asked of the registry
  CHECK(f.engine.pulls[0] == "abc123x");
  for (const auto& c : f.engine.created) CHECK(c.image != other.id);
}

TEST_CASE("image door: a container's labels are sandfortd's, whatever the image carries", "[sandbox][images]") {
  fixture f;
  f.engine.add_image("example/labelled:1",
                     {{"io.sandfort.pool", "1"}, {"io.sandfort.network", "1"},
                      {"io.sandfort.sandbox", "sbx-00000000000000bb"}, {"org.example.x", "y"}},
                     f.engine.now_unix);
  // One that says it is a snapshot is used as none.
  f.engine.add_image("example/snapshot-like:1", {{"io.sandfort.snapshot", "snap-00000000000000aa"}},
                     f.engine.now_unix);
  CHECK(create_from(f, f.org_b.id, "example/snapshot-like:1").err().code == errc::not_found);
  auto made = create_from(f, f.org_b.id, "example/labelled:1");
  INFO((made ? std::string() : made.err().message));
  REQUIRE(made);
  const auto& labels = f.engine.created.back().labels;
  CHECK(labels.at("io.sandfort.sandbox") == made->id);
  CHECK(labels.at("io.sandfort.org") == f.org_b.id);
  CHECK(labels.at("io.sandfort.pool").empty());
  CHECK(labels.at("io.sandfort.network").empty());
  CHECK(labels.at("org.example.x").empty());
}

TEST_CASE("snapshot image: the filesystem and the source image's settings, nothing of the sandbox",
          "[sandbox][snapshots][images]") {
  fixture f;
  create_request req;
  req.env = {{"MYSECRET", "hunter2"}};
  auto box = f.create_started(req);
  auto snap = snapshot_of(f, f.org_a.id, box.id, "s");
  REQUIRE(snap);
  REQUIRE(f.engine.loaded_configs.size() == 1);
  const auto& config = f.engine.loaded_configs[0];
  const std::string text = config.dump();
  for (const std::string& needle : {std::string("hunter2"), std::string("MYSECRET"), std::string("HTTP_PROXY"),
                                    box.id, f.org_a.id, std::string("/.sandfort/agent")})
    CHECK(text.find(needle) == std::string::npos);
  CHECK(config["config"]["Env"] == nlohmann::json::array({"PATH=/usr/bin"}));  // the source image's
  CHECK(config["config"]["Labels"] == nlohmann::json({{"io.sandfort.instance", f.db->instance_id()},
                                                      {"io.sandfort.snapshot", snap->id}}));
  CHECK(config["history"] == nlohmann::json::array());
  CHECK_FALSE(config.contains("container_config"));
  CHECK_FALSE(config.contains("container"));
  // The commit's own image (it kept the environment) is removed.
  CHECK(f.engine.raw_commits == 1);
  for (const auto& [id, img] : f.engine.image_details) {
    bool commit_left = img.labels.count(label_snapshot) && img.labels.at(label_snapshot) != snap->id;
    CHECK_FALSE(commit_left);
  }
}
