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
  auto rec = db_.get_sandbox(org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  if (rec->state == "paused") co_return view_of(*rec);
  if (rec->state != "started")
    co_return make_error(errc::conflict, "sandbox " + rec->id + " is " + rec->state + " and cannot be paused");
  auto marked = begin_operation(rec->id);  // its pause event is ours (container_events.cpp)
  const std::string container = rec->container_id;
  if (auto r = co_await engine_.pause_container(container); !r) {
    auto info = co_await engine_.inspect_container(container);
    if (!info || !already(*info, true)) co_return std::move(r).err();
  }
  // A stop or delete may have run while Docker answered: the row says what became of it.
  auto cur = db_.get_sandbox(org_id, rec->id);
  if (!cur) co_return std::move(cur).err();
  if (cur->state != "started" || cur->container_id != container)
    co_return make_error(errc::conflict, "sandbox " + cur->id + " became " + cur->state + " while it was being paused");
  // Connections in flight (previews, commands, sessions) stay open: they carry on after resume.
  if (auto r = set_state(*cur, "paused", {}, who, "sandbox.pause"); !r) co_return std::move(r).err();
  spdlog::info("sandbox {} paused", cur->id);
  co_return view_of(*cur);
}

task<sandbox_view> service::resume(const std::string& org_id, const std::string& id_or_name, const audit::actor& who) {
  auto rec = db_.get_sandbox(org_id, id_or_name);
  if (!rec) co_return std::move(rec).err();
  if (rec->state == "started") co_return view_of(*rec);
  if (rec->state != "paused")
    co_return make_error(errc::conflict, "sandbox " + rec->id + " is " + rec->state + " and cannot be resumed");
  auto marked = begin_operation(rec->id);  // its unpause event is ours (container_events.cpp)
  const std::string container = rec->container_id;
  if (auto r = co_await engine_.unpause_container(container); !r) {
    auto info = co_await engine_.inspect_container(container);
    if (!info || !already(*info, false)) co_return std::move(r).err();
  }
  auto cur = db_.get_sandbox(org_id, rec->id);
  if (!cur) co_return std::move(cur).err();
  if (cur->state != "paused" || cur->container_id != container)
    co_return make_error(errc::conflict, "sandbox " + cur->id + " became " + cur->state + " while it was being resumed");
  // The time it spent frozen was not use, but it must not be stopped as idle the moment it wakes.
  activity_.touch(cur->id);
  if (auto r = set_state(*cur, "started", {}, who, "sandbox.resume"); !r) co_return std::move(r).err();
  spdlog::info("sandbox {} resumed", cur->id);
  co_return view_of(*cur);
}

}  // namespace sandfort::sandbox
