#include "sandfort/core/runtimes.hpp"

#include <algorithm>

namespace sandfort {

result<void> check_runtime_list(const std::vector<std::string>& runtimes, const std::string& gvisor_runtime) {
  if (runtimes.empty()) return make_error(errc::invalid_argument, "name at least one runtime (runc, gvisor)");
  for (const auto& r : runtimes) {
    if (r != "runc" && r != "gvisor")
      return make_error(errc::invalid_argument, "'" + r + "' is not a runtime (runc, gvisor)");
    if (std::count(runtimes.begin(), runtimes.end(), r) > 1)
      return make_error(errc::invalid_argument, r + " is named twice");
  }
  if (runtimes == std::vector<std::string>{"gvisor"} && gvisor_runtime.empty())
    return make_error(errc::invalid_argument,
                      "gvisor alone needs gvisor_runtime, and gvisor_runtime is empty: no sandbox could be created");
  return {};
}

}  // namespace sandfort
