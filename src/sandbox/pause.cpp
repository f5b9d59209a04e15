// Pause and resume: Docker's freezer stops every process of a sandbox where it is, memory and
// all, and thaws it later to carry on. A paused sandbox is still running for the quotas (it
// holds its memory) but not for calls: they need its agent, which is frozen too.
#include <spdlog/spdlog.h>

#include "sandfort/sandbox/service.hpp"

namespace sandfort::sandbox {

namespace {

// Whether the container is already where the call wanted it (a `docker pause` or `unpause`
// behind our back, or an engine that answered 409 for a change it had made).
bool already(const docker::container_info& info, bool paused) { return info.running && info.paused == paused; }

}  // namespace

task<sandbox_view> service::pause(const std::string& org_id, const std::string& id_or_name, const audit::actor& who) {
  return freeze(org_id, id_or_name, true, who);
}

task<sandbox_view> service::resume(const std::string& org_id, const std::string& id_or_name, const audit::actor& who) {
  return freeze(org_id, id_or_name, false, who);
}

task<sandbox_view> service::freeze(const std::string& org_id, const std::string& id_or_name, bool paused,
                                   const audit::actor& who) {
  const std::string from = paused ? "started" : "paused", to = paused ? "paused" : "started";
  const char* verb = paused ? "paused" : "resumed";
  auto rec = sandboxes_.get_sandbox(org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  if (rec->state == to) co_return view_of(*rec);
  if (rec->state != from)
    co_return make_error(errc::conflict, "sandbox " + rec->id + " is " + rec->state + " and cannot be " + verb);
  auto marked = reconciler_.begin_operation(rec->id);  // its pause or unpause event is ours (container_events.cpp)
  const std::string container = rec->container_id;
  // Not one conditional expression with two co_awaits: GCC 12 miscompiles that.
  result<void> done = ok_t{};
  if (paused)
    done = co_await engine_.pause_container(container);
  else
    done = co_await engine_.unpause_container(container);
  if (!done) {
    auto info = co_await engine_.inspect_container(container);
    if (!info || !already(*info, paused)) co_return std::move(done).err();
  }
  // A stop or delete may have run while Docker answered: the row says what became of it.
  auto cur = sandboxes_.get_sandbox(org_id, rec->id);
  if (!cur) co_return std::move(cur).err();
  if (cur->state != from || cur->container_id != container)
    co_return make_error(errc::conflict, "sandbox " + cur->id + " became " + cur->state + " while it was being " + verb);
  // Paused: connections in flight (previews, commands, sessions) stay open and carry on after
  // resume. Resumed: the time it spent frozen was not use, but it must not be stopped as idle
  // the moment it wakes.
  if (!paused) activity_.touch(cur->id);
  if (auto r = transitions_.set_state(*cur, to, {}, who, paused ? "sandbox.pause" : "sandbox.resume"); !r)
    co_return std::move(r).err();
  spdlog::info("sandbox {} {}", cur->id, verb);
  co_return view_of(*cur);
}

}  // namespace sandfort::sandbox
