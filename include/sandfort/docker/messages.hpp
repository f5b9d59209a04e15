#pragma once
// The Engine API's messages as pure functions: the bodies sandfortd sends and the answers it
// reads, apart from the engine that carries them, so they are unit-tested on recorded answers
// and fuzzed.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "sandfort/docker/engine.hpp"

namespace sandfort::docker {

inline constexpr const char* newest_known_api = "1.47";
inline constexpr const char* oldest_supported_api = "1.41";

// The lower of the engine's ApiVersion and the newest we know; an error naming both when
// that is below the engine's MinAPIVersion or below what we support.
result<std::string> negotiate_api_version(const version_info& engine_says);
// Parses the JSON body of GET /version.
result<version_info> parse_version(const nlohmann::json& body);

// The body of POST /containers/create for spec. Pure, so it is unit-tested.
nlohmann::json to_create_body(const container_spec& spec);

// The body of POST /networks/create: internal, no traffic between containers, no masquerade.
nlohmann::json to_network_body(const network_spec& spec);
// Reads GET /networks/{name}; pure, so it is unit-tested.
result<network_info> parse_network(const nlohmann::json& body);
// "10.213.0.0/16" → "10.213.0.1"; an error when it is not an IPv4 CIDR with room for hosts.
result<std::string> first_host_address(const std::string& subnet);

// Reads a volume as POST /volumes/create, GET /volumes/{name} and each entry of GET /volumes
// answer it; pure, so it is unit-tested.
volume_info parse_volume(const nlohmann::json& body);
// Reads GET /volumes ({"Volumes": [...] or null, "Warnings": ...}); an answer that is not an
// object is an internal error.
result<std::vector<volume_info>> parse_volume_list(const nlohmann::json& body);

// Reads GET /images/json (a JSON array); anything else is an internal error. Pure, so it is unit-tested.
result<std::vector<image_info>> parse_image_list(const nlohmann::json& body);

// Reads GET /images/{name}/json; an answer without an Id is an internal error. Pure, so it is unit-tested.
result<image_details> parse_image_details(const nlohmann::json& body);

// Reads GET /containers/{id}/stats?stream=false; pure, so it is unit-tested.
container_stats parse_stats(const nlohmann::json& body);

// Reads GET /info; pure, so it is unit-tested on recorded answers.
storage_info parse_storage_info(const nlohmann::json& body);
// Whether StorageOpt size works: overlay2 on XFS, and the XFS holding root_dir mounted with
// project quotas (`mounts`: the text of /proc/self/mounts). Pure, so it is unit-tested.
bool supports_storage_quota(const storage_info& info, std::string_view mounts);

}  // namespace sandfort::docker
