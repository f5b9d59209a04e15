#include "canonical.hpp"

#include <cstdint>

namespace sandfort::audit::detail {

namespace {

constexpr int max_depth = 32;

bool continuation(unsigned char c) noexcept { return (c & 0xC0) == 0x80; }

// Length of the well-formed UTF-8 sequence at s[i] (Unicode Table 3-7), 0 when there is none:
// no overlong forms, no surrogates, nothing above U+10FFFF.
std::size_t sequence_length(std::string_view s, std::size_t i) noexcept {
  const auto at = [&](std::size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = at(0);
  if (c < 0x80) return 1;
  std::size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  if (s.size() - i < n || at(1) < lo || at(1) > hi) return 0;
  for (std::size_t k = 2; k < n; ++k)
    if (!continuation(at(k))) return 0;
  return n;
}

void write_string(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\f': out += "\\f"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += hex[c >> 4];
          out += hex[c & 0xF];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

result<void> write_value(std::string& out, const nlohmann::json& v, int depth) {
  using value_t = nlohmann::json::value_t;
  if (depth > max_depth) return make_error(errc::invalid_argument, "nested deeper than 32 levels");
  switch (v.type()) {
    case value_t::null: out += "null"; return {};
    case value_t::boolean: out += v.get<bool>() ? "true" : "false"; return {};
    case value_t::number_integer: {
      const auto n = v.get<std::int64_t>();
      if (n < -max_safe_integer || n > max_safe_integer)
        return make_error(errc::invalid_argument, "integer beyond ±(2^53 - 1)");
      out += std::to_string(n);
      return {};
    }
    case value_t::number_unsigned: {
      const auto n = v.get<std::uint64_t>();
      if (n > static_cast<std::uint64_t>(max_safe_integer))
        return make_error(errc::invalid_argument, "integer beyond ±(2^53 - 1)");
      out += std::to_string(n);
      return {};
    }
    case value_t::string: {
      const auto& s = v.get_ref<const std::string&>();
      if (!valid_utf8(s)) return make_error(errc::invalid_argument, "string is not valid UTF-8");
      write_string(out, s);
      return {};
    }
    case value_t::array: {
      out += '[';
      bool first = true;
      for (const auto& item : v) {
        if (!first) out += ',';
        first = false;
        if (auto r = write_value(out, item, depth + 1); !r) return r;
      }
      out += ']';
      return {};
    }
    case value_t::object: {
      // nlohmann's object is a std::map<std::string, ...>: iteration is in byte order, which
      // for UTF-8 is code point order.
      out += '{';
      bool first = true;
      for (const auto& [key, item] : v.items()) {
        if (!first) out += ',';
        first = false;
        if (!valid_utf8(key)) return make_error(errc::invalid_argument, "key is not valid UTF-8");
        write_string(out, key);
        out += ':';
        if (auto r = write_value(out, item, depth + 1); !r) return r;
      }
      out += '}';
      return {};
    }
    case value_t::number_float: return make_error(errc::invalid_argument, "floats have no canonical form");
    default: return make_error(errc::invalid_argument, "value has no JSON form");
  }
}

}  // namespace

bool valid_utf8(std::string_view s) noexcept {
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = sequence_length(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string repair_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const std::size_t n = sequence_length(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

bool append_string(std::string& out, std::string_view s) {
  if (!valid_utf8(s)) return false;
  write_string(out, s);
  return true;
}

result<std::string> canonical_dump(const nlohmann::json& v) {
  std::string out;
  if (auto r = write_value(out, v, 0); !r) return std::move(r).err();
  return out;
}

result<nlohmann::json> parse_details(std::string_view details) {
  // The parser rejects invalid UTF-8 and lone surrogate escapes itself.
  auto parsed = nlohmann::json::parse(details, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return make_error(errc::invalid_argument, "details is not valid JSON");
  if (!parsed.is_object()) return make_error(errc::invalid_argument, "details is not a JSON object");
  return parsed;
}

}  // namespace sandfort::audit::detail
