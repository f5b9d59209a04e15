#pragma once
// Docker API versions are "major.minor" compared as numbers: "1.9" < "1.41".

#include <optional>
#include <string_view>

namespace sandfort::docker::detail {

// <0, 0, >0 like strcmp; nullopt when either side is not "digits.digits".
std::optional<int> compare_api_versions(std::string_view a, std::string_view b);

}  // namespace sandfort::docker::detail
