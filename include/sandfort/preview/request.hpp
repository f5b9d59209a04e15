#pragma once
// Taking the preview's own credentials out of a request, so the application behind a preview
// URL never sees them: the ?sandfort_token= parameter and the sandfort_preview_token cookie.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sandfort::preview {

struct query_split {
  std::string target;                // the request target without the parameter
  std::optional<std::string> value;  // its percent-decoded value (the last one, if repeated)
};
// Removes every `name=` parameter from a request target; the others keep their order and their
// encoding, and a query left empty loses its "?".
query_split take_query_parameter(std::string_view target, std::string_view name);

struct cookie_split {
  std::string rest;                 // the Cookie header without them ("" when nothing is left)
  std::vector<std::string> values;  // the values of every cookie called name
};
// Removes every cookie called name from a Cookie header value ("a=1; name=x; b=2").
cookie_split take_cookie(std::string_view cookie_header, std::string_view name);

}  // namespace sandfort::preview
