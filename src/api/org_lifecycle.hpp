#pragma once
// Private to the api module: an organization's life cycle, across the store (its row, its keys)
// and the sandbox service (its sandboxes). Disabling refuses its keys and tokens at once and
// stops its sandboxes; deleting also revokes its keys and removes its sandboxes; the row stays
// (state deleted) so that its name and, later, its audit chain keep meaning one organization.

#include <boost/asio/awaitable.hpp>

#include "sandfort/api/api.hpp"

namespace sandfort::api {

boost::asio::awaitable<result<store::org>> disable_org(dependencies& deps, const std::string& id_or_name);
boost::asio::awaitable<result<store::org>> enable_org(dependencies& deps, const std::string& id_or_name);
// Idempotent: a deletion cut short (an error, a crash) is finished by calling it again.
boost::asio::awaitable<result<void>> delete_org(dependencies& deps, const std::string& id_or_name);

}  // namespace sandfort::api
