#pragma once
// Percent-encoding for the request targets sent to the engine.

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

namespace sandfort::docker::detail {

// Encodes every byte except RFC 3986 unreserved characters and those listed in keep.
std::string percent_encode(std::string_view s, std::string_view keep = {});

// "?k1=v1&k2=v2" with both sides encoded; "" for no parameters.
std::string query_string(std::initializer_list<std::pair<std::string_view, std::string_view>> params);

}  // namespace sandfort::docker::detail
