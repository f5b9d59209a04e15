#include "image_ref.hpp"

#include <algorithm>

namespace sandfort::docker::detail {

namespace {

bool has_bad_chars(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u <= 0x20 || u == 0x7f || c == '?' || c == '#' || c == '%';
  });
}

bool has_empty_component(std::string_view repository) {
  return repository.empty() || repository.front() == '/' || repository.back() == '/' ||
         repository.find("//") != std::string_view::npos;
}

error malformed(std::string_view ref, std::string_view why) {
  return make_error(errc::invalid_argument, "image reference \"" + std::string(ref) + "\" " + std::string(why));
}

}  // namespace

std::string image_ref::lookup_name() const {
  if (!digest.empty()) return repository + "@" + digest;
  return repository + ":" + tag;
}

result<image_ref> split_image_ref(std::string_view ref) {
  if (ref.empty()) return make_error(errc::invalid_argument, "an image reference must not be empty");
  if (has_bad_chars(ref)) return malformed(ref, "contains characters not allowed in an image reference");

  image_ref out;
  std::string_view name = ref;
  if (auto at = ref.find('@'); at != std::string_view::npos) {
    std::string_view digest = ref.substr(at + 1);
    auto colon = digest.find(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == digest.size() ||
        digest.find('@') != std::string_view::npos)
      return malformed(ref, "has a malformed digest (expected name@algorithm:hex)");
    out.digest = std::string(digest);
    name = ref.substr(0, at);
  }
  // A ':' before the last '/' belongs to a registry host's port, not to a tag.
  auto last_slash = name.rfind('/');
  auto colon = name.rfind(':');
  if (colon != std::string_view::npos && (last_slash == std::string_view::npos || colon > last_slash)) {
    out.tag = std::string(name.substr(colon + 1));
    if (out.tag.empty()) return malformed(ref, "has an empty tag");
    name = name.substr(0, colon);
  }
  if (has_empty_component(name)) return malformed(ref, "has an empty repository name or path component");
  out.repository = std::string(name);
  if (out.tag.empty() && out.digest.empty()) out.tag = "latest";
  return out;
}

}  // namespace sandfort::docker::detail

namespace sandfort::docker {

namespace {

constexpr std::size_t max_name_length = 255;  // distribution/reference's NameTotalLengthMax

bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool is_alnum(char c) { return is_lower_alnum(c) || (c >= 'A' && c <= 'Z'); }
bool is_word(char c) { return is_alnum(c) || c == '_'; }
bool is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }
bool is_lower_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }
bool is_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

error refused(std::string_view text, std::string_view why) {
  return make_error(errc::invalid_argument, "image reference \"" + std::string(text) + "\" " + std::string(why));
}

// [a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9], joined by '.'.
bool valid_domain_name(std::string_view s) {
  while (true) {
    auto dot = s.find('.');
    auto part = s.substr(0, dot);
    if (part.empty() || !is_alnum(part.front()) || !is_alnum(part.back())) return false;
    if (!std::all_of(part.begin(), part.end(), [](char c) { return is_alnum(c) || c == '-'; })) return false;
    if (dot == std::string_view::npos) return true;
    s.remove_prefix(dot + 1);
  }
}

// host[:port], where host is a domain name or a bracketed run of hex digits and colons.
bool valid_registry(std::string_view s) {
  std::string_view port;
  if (!s.empty() && s.front() == '[') {
    auto close = s.find(']');
    if (close == std::string_view::npos || close == 1) return false;
    auto inside = s.substr(1, close - 1);
    if (!std::all_of(inside.begin(), inside.end(), [](char c) { return is_hex(c) || c == ':'; })) return false;
    auto rest = s.substr(close + 1);
    if (rest.empty()) return true;
    if (rest.front() != ':') return false;
    return is_digits(rest.substr(1));
  }
  auto colon = s.find(':');
  if (colon != std::string_view::npos) {
    port = s.substr(colon + 1);
    if (!is_digits(port)) return false;
  }
  return valid_domain_name(s.substr(0, colon));
}

// [a-z0-9]+ ((\.|_|__|-+) [a-z0-9]+)*
bool valid_path_component(std::string_view s) {
  std::size_t i = 0;
  auto alnum_run = [&] {
    std::size_t start = i;
    while (i < s.size() && is_lower_alnum(s[i])) ++i;
    return i > start;
  };
  if (!alnum_run()) return false;
  while (i < s.size()) {
    if (s[i] == '.') {
      ++i;
    } else if (s[i] == '_') {
      ++i;
      if (i < s.size() && s[i] == '_') ++i;
    } else if (s[i] == '-') {
      while (i < s.size() && s[i] == '-') ++i;
    } else {
      return false;
    }
    if (!alnum_run()) return false;
  }
  return true;
}

bool valid_path(std::string_view s) {
  while (true) {
    auto slash = s.find('/');
    if (!valid_path_component(s.substr(0, slash))) return false;
    if (slash == std::string_view::npos) return true;
    s.remove_prefix(slash + 1);
  }
}

// [\w][\w.-]{0,127}
bool valid_tag(std::string_view s) {
  if (s.empty() || s.size() > 128 || !is_word(s.front())) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return is_word(c) || c == '.' || c == '-'; });
}

// [A-Za-z][A-Za-z0-9]*([-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}
bool valid_digest(std::string_view s) {
  auto colon = s.find(':');
  if (colon == std::string_view::npos) return false;
  auto algorithm = s.substr(0, colon);
  auto hex = s.substr(colon + 1);
  if (hex.size() < 32 || !std::all_of(hex.begin(), hex.end(), is_hex)) return false;
  bool at_component_start = true;
  for (char c : algorithm) {
    if (at_component_start) {
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'))) return false;
      at_component_start = false;
    } else if (c == '-' || c == '_' || c == '+' || c == '.') {
      at_component_start = true;
    } else if (!is_alnum(c)) {
      return false;
    }
  }
  return !algorithm.empty() && !at_component_start;
}

bool is_image_id(std::string_view s) {
  return s.size() == 64 && std::all_of(s.begin(), s.end(), [](char c) { return is_hex(c) && !(c >= 'A' && c <= 'F'); });
}

}  // namespace

std::string image_reference::host() const {
  if (ipv6_literal()) return registry.substr(1, registry.find(']') - 1);
  return registry.substr(0, registry.find(':'));
}

std::string image_reference::port() const {
  auto from = ipv6_literal() ? registry.find(']') + 1 : 0;
  auto colon = registry.find(':', from);
  return colon == std::string::npos ? std::string{} : registry.substr(colon + 1);
}

result<image_reference> parse_image_reference(std::string_view text) {
  if (text.empty()) return make_error(errc::invalid_argument, "an image reference must not be empty");
  if (is_image_id(text)) return refused(text, "is an image id, not a reference");
  image_reference out;
  std::string_view name = text;
  if (auto at = text.find('@'); at != std::string_view::npos) {
    out.digest = std::string(text.substr(at + 1));
    if (!valid_digest(out.digest)) return refused(text, "has a malformed digest (expected name@sha256:<hex>)");
    name = text.substr(0, at);
  }
  // The engine's splitDockerDomain, on the name with its tag.
  auto slash = name.find('/');
  std::string_view first = name.substr(0, slash);
  bool names_registry = slash != std::string_view::npos &&
                        (first.find_first_of(".:") != std::string_view::npos || first == "localhost" ||
                         std::any_of(first.begin(), first.end(), [](char c) { return c >= 'A' && c <= 'Z'; }));
  std::string_view remainder = name;
  if (names_registry) {
    out.registry = std::string(first);
    remainder = name.substr(slash + 1);
  } else {
    out.registry = "docker.io";
  }
  if (!valid_registry(out.registry)) return refused(text, "names a malformed registry \"" + out.registry + "\"");
  if (auto colon = remainder.find(':'); colon != std::string_view::npos) {
    out.tag = std::string(remainder.substr(colon + 1));
    if (!valid_tag(out.tag)) return refused(text, "has a malformed tag");
    remainder = remainder.substr(0, colon);
  }
  if (std::any_of(remainder.begin(), remainder.end(), [](char c) { return c >= 'A' && c <= 'Z'; }))
    return refused(text, "has upper case in its repository name");
  if (!valid_path(remainder))
    return refused(text, "has a malformed repository name (lower-case letters, digits and . _ - between them)");
  out.path = std::string(remainder);
  if (out.registry == "index.docker.io") out.registry = "docker.io";
  if (out.registry == "docker.io" && out.path.find('/') == std::string::npos) out.path = "library/" + out.path;
  if (out.registry.size() + 1 + out.path.size() > max_name_length)
    return refused(text, "is longer than 255 characters");
  if (out.registry == "docker.io" && out.path.rfind("library/", 0) == 0) {
    std::string_view repository = std::string_view(out.path).substr(8);
    bool hex_tag = !out.tag.empty() && std::all_of(out.tag.begin(), out.tag.end(), is_lower_hex);
    bool algorithm = repository == "sha256" || repository == "sha384" || repository == "sha512";
    if ((algorithm && hex_tag) ||
        (out.tag.empty() && out.digest.empty() && std::all_of(repository.begin(), repository.end(), is_lower_hex)))
      return refused(text, "is an image id (or a prefix of one), not a reference: images are named by "
                           "repository and tag, or by digest");
  }
  return out;
}

std::string listed_name(const image_reference& ref) {
  std::string name = ref.path;
  if (ref.registry != "docker.io")
    name = ref.registry + "/" + name;
  else if (name.rfind("library/", 0) == 0 && name.find('/', 8) == std::string::npos)
    name = name.substr(8);
  if (!ref.digest.empty()) return name + "@" + ref.digest;
  return name + ":" + (ref.tag.empty() ? std::string("latest") : ref.tag);
}

}  // namespace sandfort::docker
