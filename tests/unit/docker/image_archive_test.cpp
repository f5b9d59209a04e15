// The layerless `docker load` archive and the config a snapshot's image gets (engine.hpp): pure,
// read back here as the engine reads them. The real engine's acceptance is staged by
// tests/integration/attacks/test_snapshot_images.py.

#include <catch2/catch.hpp>
#include <map>

#include "sandfort/crypto/digest.hpp"
#include "sandfort/docker/engine.hpp"
#include "sandfort/docker/image_archive.hpp"

using namespace sandfort;
using json = nlohmann::json;

namespace {

// name → content of each file of a ustar archive, its header checksums verified.
std::map<std::string, std::string> archive_files(const std::string& tar) {
  std::map<std::string, std::string> out;
  REQUIRE(tar.size() % 512 == 0);
  for (std::size_t at = 0; at + 512 <= tar.size();) {
    std::string name = tar.substr(at, 100).c_str();
    if (name.empty()) break;
    unsigned sum = 0;
    for (std::size_t i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : static_cast<unsigned char>(tar[at + i]);
    CHECK(std::stoul(tar.substr(at + 148, 7), nullptr, 8) == sum);
    CHECK(tar[at + 156] == '0');
    std::size_t size = std::stoul(tar.substr(at + 124, 11), nullptr, 8);
    out[name] = tar.substr(at + 512, size);
    at += 512 + (size + 511) / 512 * 512;
  }
  return out;
}

}  // namespace

TEST_CASE("a layerless archive: the config under its digest and a manifest naming it and the tag") {
  const std::string config = R"({"architecture":"amd64"})";
  auto files = archive_files(docker::layerless_image_archive(config, "sandfort-snap/00aa:latest", 2));
  REQUIRE(files.size() == 2);
  const std::string config_name = sha256_hex(config) + ".json";
  CHECK(files.at(config_name) == config);
  auto manifest = json::parse(files.at("manifest.json"));
  CHECK(manifest == json::array({{{"Config", config_name},
                                  {"RepoTags", {"sandfort-snap/00aa:latest"}},
                                  {"Layers", {"0/layer.tar", "1/layer.tar"}}}}));
}

TEST_CASE("a snapshot's config keeps the layers and the source image's settings, nothing of the container") {
  const json committed = {
      {"Id", "sha256:" + std::string(64, 'c')},
      {"Architecture", "amd64"},
      {"Os", "linux"},
      {"Created", "2026-12-04T10:21:04Z"},
      {"Container", "5ec0f6d649bc"},
      {"Author", "x"},
      {"Comment", "y"},
      {"RootFS", {{"Type", "layers"}, {"Layers", {"sha256:01", "sha256:02"}}}},
      {"Config", {{"Env", {"MYSECRET=hunter2", "HTTP_PROXY=http://sbx-1:s3cret@10.213.0.1:3128"}},
                  {"Entrypoint", {"/.sandfort/agent"}},
                  {"Labels", {{"io.sandfort.sandbox", "sbx-1"}}}}},
      {"ContainerConfig", {{"Hostname", "5ec0f6d649bc"}, {"Env", {"MYSECRET=hunter2"}}}}};
  const json parent = {{"Config", {{"Env", {"PATH=/usr/bin"}},
                                   {"Cmd", {"bash"}},
                                   {"WorkingDir", "/work"},
                                   {"Hostname", "abc"},
                                   {"Labels", {{"maintainer", "m"}}}}}};
  auto config = docker::rewritten_image_config(committed, parent, {{"io.sandfort.snapshot", "snap-1"}});
  CHECK(config == json({{"architecture", "amd64"},
                        {"os", "linux"},
                        {"created", "2026-12-04T10:21:04Z"},
                        {"config", {{"Env", {"PATH=/usr/bin"}},
                                    {"Cmd", {"bash"}},
                                    {"WorkingDir", "/work"},
                                    {"Labels", {{"io.sandfort.snapshot", "snap-1"}}}}},
                        {"rootfs", {{"type", "layers"}, {"diff_ids", {"sha256:01", "sha256:02"}}}},
                        {"history", json::array()}}));
  // No parent known: no runtime settings at all.
  CHECK(docker::rewritten_image_config(committed, json(), {})["config"] == json({{"Labels", json::object()}}));
}
