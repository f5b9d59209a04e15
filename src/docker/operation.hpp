#pragma once
// What a request to the Docker Engine API is called in metrics: "container_create",
// "container_start", "image_pull", "network_inspect"… — from a small fixed set, never an id or an
// image name, so the latency histogram has a bounded number of series.

#include <ostream>  // before verb.hpp, which uses std::ostream without including it (Boost 1.81)
#include <boost/beast/http/verb.hpp>
#include <string>
#include <string_view>

namespace sandfort::docker::detail {

// `target` as sent: "/v1.43/containers/abc/start?x=1" (the version prefix is optional).
std::string operation_of(boost::beast::http::verb method, std::string_view target);

}  // namespace sandfort::docker::detail
