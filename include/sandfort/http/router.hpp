#pragma once
// Routes are plain data: {verb, "/v1/sandboxes/{id}/stop", handler}. Matching fills
// context::params; an unknown path is 404 and a known path with the wrong verb is 405.

#include <boost/asio/awaitable.hpp>
#include <functional>
#include <string>
#include <vector>

#include "sandfort/http/message.hpp"

namespace sandfort::http {

using handler = std::function<boost::asio::awaitable<response>(context&)>;

struct route {
  verb method;
  std::string pattern;
  handler fn;
};

class router {
 public:
  void add(route r);
  void add(std::vector<route> routes);

  struct match_result {
    const route* found = nullptr;  // null: see status
    unsigned status = 404;         // 404 no such path, 405 path exists for another verb
  };
  // Fills params on success.
  match_result match(verb method, const std::string& path, std::map<std::string, std::string>& params) const;

  // Dispatches ctx to its route, or answers 404/405 in the API's error shape.
  boost::asio::awaitable<response> dispatch(context& ctx) const;

 private:
  std::vector<route> routes_;
};

// True when path matches pattern segment by segment; {name} captures one non-empty segment.
bool match_pattern(const std::string& pattern, const std::string& path, std::map<std::string, std::string>& params);

}  // namespace sandfort::http
