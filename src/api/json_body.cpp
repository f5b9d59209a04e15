#include "json_body.hpp"

#include <cmath>
#include <cstdint>
#include <limits>

namespace sandfort::api {

using nlohmann::json;

namespace {
error wrong_type(const char* key, const char* expected) {
  return make_error(errc::invalid_argument, std::string("field '") + key + "' must be " + expected);
}
bool absent(const json& j, const char* key) { return !j.contains(key) || j.at(key).is_null(); }
}  // namespace

result<json> parse_object(std::string_view body) {
  if (body.empty()) return json::object();
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded()) return make_error(errc::invalid_argument, "request body is not valid JSON");
  if (!j.is_object()) return make_error(errc::invalid_argument, "request body must be a JSON object");
  return j;
}

result<void> read(const json& j, const char* key, std::string& out) {
  if (absent(j, key)) return {};
  if (!j.at(key).is_string()) return wrong_type(key, "a string");
  out = j.at(key).get<std::string>();
  return {};
}

result<void> read(const json& j, const char* key, bool& out) {
  if (absent(j, key)) return {};
  if (!j.at(key).is_boolean()) return wrong_type(key, "true or false");
  out = j.at(key).get<bool>();
  return {};
}

result<void> read(const json& j, const char* key, std::optional<std::int64_t>& out) {
  if (absent(j, key)) return {};
  const json& v = j.at(key);
  if (v.is_number_unsigned()) {
    // nlohmann keeps integers above INT64_MAX as unsigned: reading them as int64 would wrap.
    if (v.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
      return wrong_type(key, "an integer from -2^63 to 2^63-1");
    out = v.get<std::int64_t>();
  } else if (v.is_number_integer()) {
    out = v.get<std::int64_t>();
  } else if (v.is_number_float()) {
    // 3.0 is 3. Casting a double outside [-2^63, 2^63) to an integer is undefined behaviour
    // (found by tests/fuzz/fuzz_api_json: {"ttl_s": 1e300}), so the range is checked first.
    constexpr double two_to_63 = 9223372036854775808.0;
    const double d = v.get<double>();
    if (!(d >= -two_to_63 && d < two_to_63) || d != std::trunc(d)) return wrong_type(key, "an integer");
    out = static_cast<std::int64_t>(d);
  } else {
    return wrong_type(key, "an integer");
  }
  return {};
}

result<void> read(const json& j, const char* key, std::optional<double>& out) {
  if (absent(j, key)) return {};
  if (!j.at(key).is_number()) return wrong_type(key, "a number");
  out = j.at(key).get<double>();
  return {};
}

result<void> read(const json& j, const char* key, std::optional<std::string>& out) {
  if (absent(j, key)) return {};
  if (!j.at(key).is_string()) return wrong_type(key, "a string");
  out = j.at(key).get<std::string>();
  return {};
}

result<void> read(const json& j, const char* key, std::vector<std::string>& out) {
  if (absent(j, key)) return {};
  const json& v = j.at(key);
  if (!v.is_array()) return wrong_type(key, "an array of strings");
  std::vector<std::string> items;
  for (const auto& item : v) {
    if (!item.is_string()) return wrong_type(key, "an array of strings");
    items.push_back(item.get<std::string>());
  }
  out = std::move(items);
  return {};
}

result<void> read(const json& j, const char* key, std::map<std::string, std::string>& out) {
  if (absent(j, key)) return {};
  const json& v = j.at(key);
  if (!v.is_object()) return wrong_type(key, "an object of strings");
  std::map<std::string, std::string> items;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!it.value().is_string()) return wrong_type(key, "an object of strings");
    items[it.key()] = it.value().get<std::string>();
  }
  out = std::move(items);
  return {};
}

namespace {

template <typename T>
result<void> read_present(const json& j, const char* key, std::optional<T>& out) {
  if (absent(j, key)) return {};
  T value;
  if (auto r = read(j, key, value); !r) return r;
  out = std::move(value);
  return {};
}

}  // namespace

result<void> read(const json& j, const char* key, std::optional<std::vector<std::string>>& out) {
  return read_present(j, key, out);
}

result<void> read(const json& j, const char* key, std::optional<std::map<std::string, std::string>>& out) {
  return read_present(j, key, out);
}

result<std::optional<std::int64_t>> query_int(const http::context& ctx, const char* key) {
  auto it = ctx.query.find(key);
  if (it == ctx.query.end() || it->second.empty()) return std::optional<std::int64_t>{};
  try {
    std::size_t used = 0;
    long long v = std::stoll(it->second, &used);
    if (used == it->second.size() && v >= 0) return std::optional<std::int64_t>{v};
  } catch (const std::exception&) {
  }
  return make_error(errc::invalid_argument, std::string("query parameter '") + key + "' must be a non-negative integer");
}

result<sandbox::name_page_request> parse_name_page(const http::context& ctx) {
  sandbox::name_page_request page;
  auto limit = query_int(ctx, "limit");
  if (!limit) return std::move(limit).err();
  if (*limit && (**limit < 1 || **limit > 1000))
    return make_error(errc::invalid_argument, "limit must be between 1 and 1000");
  page.limit = static_cast<std::size_t>(limit->value_or(100));
  if (auto it = ctx.query.find("cursor"); it != ctx.query.end()) page.cursor = it->second;
  return page;
}

}  // namespace sandfort::api
