#pragma once
// Image archives and configs built without the engine (snapshots, exports, restores). Pure.

#include <cstddef>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "sandfort/docker/engine.hpp"

namespace sandfort::docker {

// A `docker load` archive of one image whose layers the engine already holds: the config
// (its own file, named by its digest), a manifest naming it `repo_tag`, and no layer at all
// (the engine finds each layer by its chain id and reads no file for it). Pure.
std::string layerless_image_archive(const std::string& config_json, const std::string& repo_tag,
                                    std::size_t layer_count);

// A tar archive of one empty directory `name` (relative, no slashes inside), mode 0755. Pure.
std::string directory_archive(const std::string& name);
// A tar archive of files (relative paths, mode 0644, root-owned) and the directories named before
// them ("etc/sandfort/", mode 0755), in the order given. Pure.
std::string files_archive(const std::vector<std::pair<std::string, std::string>>& entries);

// The config of a committed image rewritten to hold its filesystem and nothing of the container
// it was committed from. Docker's commit keeps the container's whole configuration (its
// environment with every secret in it, labels, hostname, command) in ContainerConfig, its id in
// `container`, its command in the history; none of that survives here. From `committed` (its
// inspect answer): the layers, architecture, os, variant and creation time. From `parent` (the
// inspect answer of the image the container was made from, or null): the runtime settings an
// image gives a container (Env, Cmd, Entrypoint, WorkingDir, User, ExposedPorts, Volumes,
// StopSignal, Shell, Healthcheck, OnBuild). Labels: exactly `labels`. History: none. Pure.
nlohmann::json rewritten_image_config(const nlohmann::json& committed, const nlohmann::json& parent,
                                      const std::map<std::string, std::string>& labels);

}  // namespace sandfort::docker
