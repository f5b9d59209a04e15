// The warm pool's members (warm_pool.hpp, docs/pool.md): made through the image door, the spec
// builder and the transitions a create uses, and removed when never claimed.
#include <spdlog/spdlog.h>

#include "sandfort/core/ids.hpp"
#include "sandfort/sandbox/image_resolution.hpp"
#include "sandfort/sandbox/spec.hpp"
#include "sandfort/sandbox/warm_pool.hpp"

namespace sandfort::sandbox {

namespace asio = boost::asio;

task<pool_member> warm_pool::make_member(const pool_config& which) {
  if (!net_.ready()) co_return make_error(errc::unavailable, "the sandbox network is not ready");
  store::sandbox_record rec;
  rec.id = new_id("sbx-");  // the claimant's sandbox id, random like any other
  rec.snapshot = which.image;
  // Through the one door like a create's image (image_resolution.cpp), and made by id.
  const std::string no_snapshot;
  auto image = co_await resolve_image(engine_, db_.instance_id(), which.image, no_snapshot);
  if (!image) co_return std::move(image).err();
  if (!*image) {
    if (auto pulled = co_await engine_.pull_image(which.image); !pulled) co_return std::move(pulled).err();
    image = co_await resolve_image(engine_, db_.instance_id(), which.image, no_snapshot);
    if (!image) co_return std::move(image).err();
    if (!*image) co_return make_error(errc::not_found, "image " + which.image + " not found");
  }
  sandbox_spec spec;
  spec.limits = {which.resources->cpus, which.resources->memory_mb, which.resources->pids, cfg_.disk.default_mb};
  const container_site site{db_.instance_id(), net_.info().name, net_.info().gateway, hard_disk_};
  auto container = container_for(cfg_, site, rec, spec, {}, **image);
  // No environment of anyone's (no proxy credential either: the proxy knows no row for it); the
  // claim brings both. No organization in the labels: the member belongs to none yet.
  container.env.clear();
  container.labels[label_pool] = "1";
  auto id = co_await engine_.create_container(container);
  if (!id) co_return std::move(id).err();
  rec.container_id = *id;
  auto started = co_await transitions_.start_and_wait(rec);
  if (!started) {
    (void)co_await transitions_.destroy_container(rec);
    co_return std::move(started).err();
  }
  co_return pool_member{rec.id, rec.container_id, rec.address};
}

asio::awaitable<void> warm_pool::destroy(pool_member member) {
  agent_.forget(member.sandbox_id);
  if (auto r = co_await engine_.remove_container(member.container_id); !r && r.err().code != errc::not_found)
    spdlog::warn("pool: cannot remove member {}: {}", member.sandbox_id, r.err().message);
}

}  // namespace sandfort::sandbox
