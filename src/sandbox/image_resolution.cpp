// One door for image references (DESIGN's "References a caller supplies", docs/security.md): every
// image a container is made from is looked up here, by a name sandfortd built, checked, and
// handed to Docker by its id. Docker never interprets a caller's string: the engine reads a name
// it does not know as an image-id prefix ("sha256:2" is repository "sha256", tag "2", and then
// any local image whose id starts with 2), which reached every image on the host.
#include <algorithm>

#include "sandfort/sandbox/image_resolution.hpp"
#include "sandfort/sandbox/snapshots.hpp"  // label_snapshot
#include "sandfort/sandbox/spec.hpp"

namespace sandfort::sandbox {

namespace {

bool lists(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

std::string label_value(const std::map<std::string, std::string>& labels, const char* key) {
  auto it = labels.find(key);
  return it == labels.end() ? std::string() : it->second;
}

}  // namespace

task<std::optional<docker::image_details>> resolve_image(docker::engine& engine, const std::string& instance_id,
                                                         const std::string& image,
                                                         const std::string& own_snapshot_id) {
  using found_t = std::optional<docker::image_details>;
  if (!own_snapshot_id.empty()) {
    // The organization's snapshot: its image_ref was made by sandfortd, and the image must still
    // be the one that snapshot's commit made (its tag, this instance's and this snapshot's labels).
    auto found = co_await engine.inspect_image(image);
    if (!found && found.err().code != errc::not_found) co_return std::move(found).err();
    if (!found || !lists(found->repo_tags, image) || label_value(found->labels, label_snapshot) != own_snapshot_id ||
        label_value(found->labels, label_instance) != instance_id)
      co_return make_error(errc::not_found, "the image of snapshot " + own_snapshot_id + " is missing");
    co_return found_t(std::move(*found));
  }
  // A reference: the policy has parsed and allowed it (spec.cpp). Looked up under the name the
  // engine lists it by; an answer that does not carry that name is an image the engine matched
  // some other way (an id prefix), so the one named is not here.
  auto ref = docker::parse_image_reference(image);
  if (!ref) co_return make_error(errc::invalid_argument, "snapshot: " + ref.err().message);
  const std::string listed = docker::listed_name(*ref);
  auto found = co_await engine.inspect_image(listed);
  if (!found) {
    if (found.err().code == errc::not_found) co_return found_t();
    co_return std::move(found).err();
  }
  if (!lists(ref->digest.empty() ? found->repo_tags : found->repo_digests, listed)) co_return found_t();
  // Snapshot images are reached through their organization's snapshot names only, under any
  // name someone gave them: the answer is the one for a snapshot that does not exist.
  if (!label_value(found->labels, label_snapshot).empty())
    co_return make_error(errc::not_found, "snapshot " + image + " not found");
  co_return found_t(std::move(*found));
}

task<std::optional<docker::image_details>> resolve_image_of(docker::engine& engine, store::resource_store& resources,
                                                            const std::string& instance_id,
                                                            const store::sandbox_record& rec) {
  auto spec = spec_from_json(rec.spec_json);
  const std::string no_snapshot;
  if (spec.snapshot_name.empty()) co_return co_await resolve_image(engine, instance_id, rec.snapshot, no_snapshot);
  auto s = resources.get_snapshot(rec.org_id, spec.snapshot_name);
  if (!s || s->image_ref != rec.snapshot)
    co_return make_error(errc::not_found, "snapshot " + spec.snapshot_name + " not found");
  co_return co_await resolve_image(engine, instance_id, rec.snapshot, s->id);
}

}  // namespace sandfort::sandbox
