#pragma once
// Taking the preview's own token parameter (?sandfort_token=) out of a request target, so the
// application behind a preview URL never sees it (its cookie: http::take_cookie).

#include <optional>
#include <string>
#include <string_view>

namespace sandfort::preview {

struct query_split {
  std::string target;                // the request target without the parameter
  std::optional<std::string> value;  // its percent-decoded value (the last one, if repeated)
};
// Removes every `name=` parameter from a request target; the others keep their order and their
// encoding, and a query left empty loses its "?".
query_split take_query_parameter(std::string_view target, std::string_view name);

}  // namespace sandfort::preview
