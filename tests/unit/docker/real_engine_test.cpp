// unix_engine against the real Docker engine on /var/run/docker.sock. Every test removes its
// containers (found by their io.sandfort.test label) even when it fails.

#include <catch2/catch.hpp>

#include "api_version.hpp"
#include "sandfort/docker/engine.hpp"
#include "sandfort/docker/messages.hpp"
#include "support.hpp"
#include "unix_engine.hpp"

using namespace sandfort;
using namespace sandfort::docker;
using test::real_engine;
using test::run;

namespace {

void require_base_image(unix_engine& engine) {
  auto present = run(engine.image_exists(test::base_image));
  REQUIRE(present.ok());
  if (!*present) FAIL("image " << test::base_image << " is missing: build it with scripts/setup");
}

container_spec sleeper(const std::string& token) {
  container_spec spec;
  spec.name = "sandfort-test-" + token;
  spec.image = test::base_image;
  spec.entrypoint = {"sleep", "300"};
  spec.labels = {{test::test_label, token}};
  spec.network_mode = "none";
  spec.memory_bytes = 64ll << 20;
  spec.pids_limit = 64;
  spec.cpus = 0.5;
  spec.stop_timeout_s = 2;
  return spec;
}

std::string label_filter(const std::string& token) { return std::string(test::test_label) + "=" + token; }

}  // namespace

TEST_CASE("the real engine's API version is negotiated within what we support", "[docker]") {
  if (!test::docker_tests_enabled()) return;
  auto engine = real_engine();
  auto info = run(engine.version());
  REQUIRE(info.ok());
  auto v = run(engine.api_version());
  REQUIRE(v.ok());
  INFO("Docker " << info->version << " speaks " << info->api_version << ", negotiated " << *v);
  CHECK(*detail::compare_api_versions(*v, oldest_supported_api) >= 0);
  CHECK(*detail::compare_api_versions(*v, newest_known_api) <= 0);
  CHECK(*detail::compare_api_versions(*v, info->api_version) <= 0);
}

TEST_CASE("a container's whole life on the real engine", "[docker]") {
  if (!test::docker_tests_enabled()) return;
  auto engine = real_engine();
  require_base_image(engine);
  auto token = test::unique_token();
  test::container_sweeper sweep(token);
  auto spec = sleeper(token);

  auto id = run(engine.create_container(spec));
  REQUIRE(id.ok());

  auto again = run(engine.create_container(spec));
  REQUIRE_FALSE(again.ok());
  CHECK(again.err().code == errc::conflict);

  // What the engine recorded is what the spec asked for.
  auto hc = test::run_command({"docker", "inspect", "--format",
                               "{{.HostConfig.Memory}} {{.HostConfig.MemorySwap}} {{.HostConfig.PidsLimit}} "
                               "{{.HostConfig.NanoCpus}} {{.HostConfig.Init}} {{json .HostConfig.CapDrop}} "
                               "{{json .HostConfig.SecurityOpt}} {{.HostConfig.NetworkMode}} {{.HostConfig.Privileged}}",
                               *id});
  REQUIRE(hc.exit_code == 0);
  CHECK(hc.output == "67108864 67108864 64 500000000 true [\"ALL\"] [\"no-new-privileges\"] none false\n");

  REQUIRE(run(engine.start_container(*id)).ok());
  CHECK(run(engine.start_container(*id)).ok());  // already running: 304, fine

  auto running = run(engine.inspect_container(*id));
  REQUIRE(running.ok());
  CHECK(running->id == *id);
  CHECK(running->name == spec.name);
  CHECK(running->running);
  CHECK(running->status == "running");
  CHECK(running->labels.at(test::test_label) == token);

  auto listed = run(engine.list_containers({label_filter(token)}));
  REQUIRE(listed.ok());
  REQUIRE(listed->size() == 1);
  CHECK(listed->front().id == *id);
  CHECK(listed->front().name == spec.name);
  CHECK(listed->front().running);

  REQUIRE(run(engine.stop_container(*id, 2)).ok());
  CHECK(run(engine.stop_container(*id, 2)).ok());  // already stopped: 304, fine

  auto stopped = run(engine.inspect_container(*id));
  REQUIRE(stopped.ok());
  CHECK_FALSE(stopped->running);
  CHECK(stopped->status == "exited");
  CHECK(stopped->exit_code != 0);  // ended by SIGTERM (through tini) or SIGKILL
  CHECK_FALSE(stopped->oom_killed);

  REQUIRE(run(engine.remove_container(*id)).ok());
  auto removed_again = run(engine.remove_container(*id));
  REQUIRE_FALSE(removed_again.ok());
  CHECK(removed_again.err().code == errc::not_found);
  auto gone = run(engine.inspect_container(*id));
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.err().code == errc::not_found);

  auto none_left = run(engine.list_containers({label_filter(token)}));
  REQUIRE(none_left.ok());
  CHECK(none_left->empty());
}

TEST_CASE("remove force-removes a running container", "[docker]") {
  if (!test::docker_tests_enabled()) return;
  auto engine = real_engine();
  require_base_image(engine);
  auto token = test::unique_token();
  test::container_sweeper sweep(token);

  auto id = run(engine.create_container(sleeper(token)));
  REQUIRE(id.ok());
  REQUIRE(run(engine.start_container(*id)).ok());
  REQUIRE(run(engine.remove_container(*id)).ok());
  auto gone = run(engine.inspect_container(*id));
  REQUIRE_FALSE(gone.ok());
  CHECK(gone.err().code == errc::not_found);
}

TEST_CASE("creating from an image that is not there is not_found", "[docker]") {
  if (!test::docker_tests_enabled()) return;
  auto engine = real_engine();
  auto token = test::unique_token();
  test::container_sweeper sweep(token);
  auto spec = sleeper(token);
  spec.image = "sandfort/nosuch:0";
  auto id = run(engine.create_container(spec));
  REQUIRE_FALSE(id.ok());
  CHECK(id.err().code == errc::not_found);
  CHECK_THAT(id.err().message, Catch::Contains("sandfort/nosuch:0"));
}

TEST_CASE("image_exists tells present from absent images", "[docker]") {
  if (!test::docker_tests_enabled()) return;
  auto engine = real_engine();
  require_base_image(engine);
  auto absent = run(engine.image_exists("sandfort/nosuch:0"));
  REQUIRE(absent.ok());
  CHECK_FALSE(*absent);
}

TEST_CASE("a pull from a registry that does not answer fails naming the image, without hanging", "[docker]") {
  if (!test::docker_tests_enabled()) return;
  auto engine = real_engine();
  auto started = std::chrono::steady_clock::now();
  auto pulled = run(engine.pull_image("localhost:1/nosuch:0"));
  REQUIRE_FALSE(pulled.ok());
  CHECK(pulled.err().code == errc::unavailable);
  CHECK_THAT(pulled.err().message, Catch::StartsWith("image \"localhost:1/nosuch:0\" could not be pulled: "));
  CHECK(std::chrono::steady_clock::now() - started < std::chrono::seconds(30));
}
