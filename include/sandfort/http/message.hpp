#pragma once
// The HTTP types every layer above the server shares, and the helpers that build the
// JSON responses of the API contract (including its error shape).

#include <boost/beast/http.hpp>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "sandfort/core/error.hpp"

namespace sandfort::http {

namespace bhttp = boost::beast::http;
using verb = bhttp::verb;
using request = bhttp::request<bhttp::string_body>;
using response = bhttp::response<bhttp::string_body>;

// One request as a handler sees it: the message, its id, and what routing extracted.
struct context {
  request req;
  std::string request_id;
  std::string remote;                              // the client's address ("unix" on a unix socket)
  std::string path;                                // without the query string
  std::map<std::string, std::string> query;        // decoded ?k=v pairs (last one wins)
  std::map<std::string, std::string> params;       // {name} segments of the matched route
  std::map<std::string, std::string> attributes;   // set by middleware (org, principal, ...)
};

response json_response(unsigned status, const nlohmann::json& body);
response empty_response(unsigned status);
// {"error": {"code", "message", "request_id"}} with the status that the code maps to.
response error_response(const error& e, const std::string& request_id);

// Splits "/a/b?x=1&y=%2F" into path and decoded query.
void split_target(std::string_view target, std::string& path, std::map<std::string, std::string>& query);
std::string percent_decode(std::string_view s);

}  // namespace sandfort::http
