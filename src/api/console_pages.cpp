#include "console_pages.hpp"

#include "console_assets.hpp"

#include <cstdlib>
#include <string>
#include <string_view>

namespace sandfort::api {

namespace {

// 'self' only, no inline script or style, no eval; frame-ancestors 'none' refuses every frame
// (clickjacking); form-action and base-uri shut the two ways around script-src.
constexpr const char* content_security_policy =
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self' data:; "
    "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

// "gzip" among Accept-Encoding's codings, not refused with q=0 (RFC 9110 12.5.3). Every browser
// sends it; a client that does not gets the plain bytes.
bool accepts_gzip(const http::request& req) {
  auto field = req.find(http::bhttp::field::accept_encoding);
  if (field == req.end()) return false;
  std::string_view codings = field->value();
  while (!codings.empty()) {
    auto comma = codings.find(',');
    std::string_view coding = codings.substr(0, comma);
    codings = comma == std::string_view::npos ? std::string_view{} : codings.substr(comma + 1);
    while (!coding.empty() && coding.front() == ' ') coding.remove_prefix(1);
    auto semi = coding.find(';');
    std::string_view name = coding.substr(0, semi);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (name != "gzip") continue;
    if (semi == std::string_view::npos) return true;
    std::string_view params = coding.substr(semi + 1);
    auto q = params.find("q=");
    return q == std::string_view::npos || std::strtod(std::string(params.substr(q + 2)).c_str(), nullptr) > 0;
  }
  return false;
}

void secure_headers(http::response& res) {
  res.set("Content-Security-Policy", content_security_policy);
  res.set("X-Frame-Options", "DENY");
  res.set("X-Content-Type-Options", "nosniff");
  res.set("Referrer-Policy", "no-referrer");
  res.set("Cross-Origin-Opener-Policy", "same-origin");
}

}  // namespace

std::optional<http::response> console_page(const http::context& ctx) {
  const std::string& path = ctx.path;
  if (path != "/console" && !path.starts_with("/console/")) return std::nullopt;
  const auto method = ctx.req.method();
  if (method != http::verb::get && method != http::verb::head) {
    auto res = http::error_response(make_error(errc::invalid_argument, "the console's pages are read with GET"),
                                    ctx.request_id);
    res.result(http::bhttp::status::method_not_allowed);
    res.set(http::bhttp::field::allow, "GET, HEAD");
    return res;
  }
  if (path == "/console") {
    http::response res = http::empty_response(308);
    res.set(http::bhttp::field::location, "/console/");
    return res;
  }
  std::string_view name = std::string_view(path).substr(std::string_view("/console/").size());
  if (name.empty()) name = "index.html";
  for (const auto& asset : console_assets()) {
    if (asset.name != name) continue;
    http::response res;
    secure_headers(res);
    const bool gzipped = !asset.gzipped.empty() && accepts_gzip(ctx.req);
    // Each encoding is its own representation, with its own tag (RFC 9110 8.8.3).
    std::string etag(asset.etag);
    if (gzipped) etag.insert(etag.size() - 1, "-gz");
    res.set(http::bhttp::field::etag, etag);
    if (!asset.gzipped.empty()) res.set(http::bhttp::field::vary, "Accept-Encoding");
    // Checked again on every load (a new sandfortd serves a new page), sent again only when changed.
    res.set(http::bhttp::field::cache_control, "no-cache");
    auto match = ctx.req.find(http::bhttp::field::if_none_match);
    if (match != ctx.req.end() && match->value() == etag) {
      res.result(http::bhttp::status::not_modified);
      return res;
    }
    res.result(http::bhttp::status::ok);
    res.set(http::bhttp::field::content_type, asset.content_type);
    std::string_view body = gzipped ? asset.gzipped : asset.body;
    if (gzipped) res.set(http::bhttp::field::content_encoding, "gzip");
    if (method == http::verb::get) res.body().assign(body.data(), body.size());
    return res;
  }
  auto res = http::error_response(make_error(errc::not_found, "no such console file"), ctx.request_id);
  secure_headers(res);
  return res;
}

}  // namespace sandfort::api
