#pragma once
// An organization's secret as the API sees it (docs/secrets.md): its name, the hosts it is bound
// to, where the proxy will put it, and its version. The value goes in (create, rotate) and never
// comes out: no view carries it.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sandfort::secrets {

// Where a request to a bound host carries the value. Exactly one kind.
struct placement {
  enum class kind { header, query, basic_auth };
  kind type = kind::header;
  std::string header;    // header: its name ("Authorization")
  std::string format;    // header: the value's text around "{value}" ("Bearer {value}")
  std::string query;     // query: the parameter's name ("api_key")
  std::string username;  // basic_auth: the user; the value is the password
};

struct secret_create {
  std::string name;
  std::string value;
  std::vector<std::string> hosts;
  secrets::placement placement;
};

// A rotation: a new value, new hosts, or both.
struct secret_rotate {
  std::optional<std::string> value;
  std::optional<std::vector<std::string>> hosts;
};

struct secret_view {
  std::string name;
  std::vector<std::string> hosts;
  secrets::placement placement;
  std::int64_t version = 1;
  std::string created_at;
  std::string updated_at;
};

}  // namespace sandfort::secrets
