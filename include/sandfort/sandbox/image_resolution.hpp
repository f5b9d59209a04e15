#pragma once
// The one door for image references (src/sandbox/image_resolution.cpp): every image a container
// is made from is looked up here, by a name sandfortd built, checked, and handed to Docker by id.

#include <optional>
#include <string>

#include "sandfort/core/error.hpp"
#include "sandfort/docker/engine.hpp"
#include "sandfort/sandbox/types.hpp"
#include "sandfort/store/resource_store.hpp"
#include "sandfort/store/sandbox_store.hpp"

namespace sandfort::sandbox {

// `image` is a reference the policy allowed, or (own_snapshot_id given) that snapshot's
// image_ref; `instance_id`: this daemon's. Returns the image the name reaches as written; nullopt
// when a reference is not present (it may be pulled); not_found for any snapshot image reached
// by another name, or an own snapshot's missing image.
task<std::optional<docker::image_details>> resolve_image(docker::engine& engine, const std::string& instance_id,
                                                         const std::string& image,
                                                         const std::string& own_snapshot_id);
// resolve_image for a sandbox's row (its snapshot name tells an own snapshot).
task<std::optional<docker::image_details>> resolve_image_of(docker::engine& engine, store::resource_store& resources,
                                                            const std::string& instance_id,
                                                            const store::sandbox_record& rec);

}  // namespace sandfort::sandbox
