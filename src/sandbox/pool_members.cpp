// The service's side of the warm pool (warm_pool.hpp, docs/pool.md): making members and
// claiming them for a create.
#include <spdlog/spdlog.h>

#include "sandfort/core/ids.hpp"
#include "sandfort/crypto/digest.hpp"
#include "sandfort/sandbox/service.hpp"

namespace sandfort::sandbox {

namespace asio = boost::asio;

task<pool_member> service::make_pool_member(const pool_config& pool) {
  if (!net_.ready()) co_return make_error(errc::unavailable, "the sandbox network is not ready");
  store::sandbox_record rec;
  rec.id = new_id("sbx-");  // the claimant's sandbox id, random like any other
  rec.snapshot = pool.image;
  // Through the one door like a create's image (image_resolution.cpp), and made by id.
  const std::string no_snapshot;
  auto image = co_await resolve_image(pool.image, no_snapshot);
  if (!image) co_return std::move(image).err();
  if (!*image) {
    if (auto pulled = co_await engine_.pull_image(pool.image); !pulled) co_return std::move(pulled).err();
    image = co_await resolve_image(pool.image, no_snapshot);
    if (!image) co_return std::move(image).err();
    if (!*image) co_return make_error(errc::not_found, "image " + pool.image + " not found");
  }
  sandbox_spec spec;
  spec.limits = {pool.resources->cpus, pool.resources->memory_mb, pool.resources->pids, cfg_.disk.default_mb};
  auto container = container_for(cfg_, site(), rec, spec, {}, **image);
  // No environment of anyone's (no proxy credential either: the proxy knows no row for it); the
  // claim brings both. No organization in the labels: the member belongs to none yet.
  container.env.clear();
  container.labels[label_pool] = "1";
  auto id = co_await engine_.create_container(container);
  if (!id) co_return std::move(id).err();
  rec.container_id = *id;
  auto started = co_await start_and_wait(rec);
  if (!started) {
    (void)co_await transitions_.destroy_container(rec);
    co_return std::move(started).err();
  }
  co_return pool_member{rec.id, rec.container_id, rec.address};
}

asio::awaitable<void> service::destroy_pool_member(pool_member member) {
  agent_.forget(member.sandbox_id);
  if (auto r = co_await engine_.remove_container(member.container_id); !r && r.err().code != errc::not_found)
    spdlog::warn("pool: cannot remove member {}: {}", member.sandbox_id, r.err().message);
}

task<void> service::claim_agent(const store::sandbox_record& rec, const std::string& proxy_secret) {
  auto spec = spec_from_json(rec.spec_json);
  auto env = sandbox_environment(rec.id, spec, proxy_secret, net_.info().gateway, cfg_.egress.proxy_port);
  co_return co_await agent_.claim(agent_address_of(rec), std::move(env), effective_workdir(spec));
}

task<void> service::provision_pooled(store::sandbox_record& rec, std::string proxy_secret) {
  auto claimed = co_await claim_agent(rec, proxy_secret);
  if (claimed) {
    // Deleted while the agent answered: the delete removed the container with the row.
    if (!sandboxes_.get_sandbox(rec.org_id, rec.id))
      co_return make_error(errc::conflict, "sandbox " + rec.id + " was deleted while it was being created");
    co_return co_await finish_start(rec);
  }
  // The member died waiting (or its agent misbehaves): made cold instead, under the same row.
  spdlog::warn("sandbox {}: the pool's member did not take the claim ({}); creating it cold", rec.id,
               claimed.err().message);
  (void)co_await transitions_.destroy_container(rec);
  rec.container_id.clear();
  rec.address.clear();
  auto spec = spec_from_json(rec.spec_json);
  spec.pooled = false;
  rec.spec_json = spec_to_json(spec);
  {  // both or neither (a full disk may refuse the second)
    auto tx = db_.begin();
    if (!tx) co_return std::move(tx).err();
    if (auto r = sandboxes_.update_sandbox_spec(rec); !r) co_return r;
    if (auto r = sandboxes_.update_sandbox(rec); !r) co_return r;
    if (auto r = tx->commit(); !r) co_return r;
  }
  co_return co_await provision(rec, std::move(proxy_secret));
}

}  // namespace sandfort::sandbox
