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
