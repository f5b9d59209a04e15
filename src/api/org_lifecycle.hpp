#pragma once
// Private to the api module: an organization's life cycle, across the identity backend (its row,
// its keys) and the sandbox backends (its sandboxes, volumes, snapshots). Disabling refuses its keys and tokens at once and
// stops its sandboxes; deleting also revokes its keys and removes its sandboxes; the row stays
// (state deleted) so that its name and, later, its audit chain keep meaning one organization.

#include <boost/asio/awaitable.hpp>

#include "sandfort/api/api.hpp"
#include "sandfort/auth/principal.hpp"

namespace sandfort::api {

// Each state change is recorded in the organization's audit chain and in the actor's (the
// superadmin's), atomically with the change. Deleting closes the organization's chain with a
// last event, `org.delete`; the chain stays, verifiable.
boost::asio::awaitable<result<store::org>> disable_org(dependencies& deps, const auth::principal& by,
                                                       const audit::actor& who, const std::string& id_or_name);
boost::asio::awaitable<result<store::org>> enable_org(dependencies& deps, const auth::principal& by,
                                                      const audit::actor& who, const std::string& id_or_name);
// Idempotent: a deletion cut short (an error, a crash) is finished by calling it again.
boost::asio::awaitable<result<void>> delete_org(dependencies& deps, const auth::principal& by, const audit::actor& who,
                                                const std::string& id_or_name);

}  // namespace sandfort::api
