// The registry and its text rendering: the exposition format 0.0.4 line by line, escaping,
// histogram buckets (cumulative, le inclusive, +Inf), registration rules and the cap on series.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <sstream>
#include <thread>

#include "sandfort/metrics/registry.hpp"

using namespace sandfort::metrics;

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

bool has_line(const std::string& text, const std::string& line) {
  for (const auto& l : lines_of(text))
    if (l == line) return true;
  return false;
}

}  // namespace

TEST_CASE("metrics: a counter renders HELP, TYPE and one line per series", "[metrics]") {
  registry r;
  auto& c = r.counter("sandfort_things_total", "Things that happened.", {"kind", "code"});
  c.inc({"a", "200"});
  c.inc({"a", "200"}, 2);
  c.inc({"b", "404"});
  c.inc({"b", "404"}, -5);  // ignored: counters only go up
  CHECK(c.value({"a", "200"}) == 3);
  CHECK(c.value({"never", "seen"}) == 0);
  CHECK(r.render() ==
        "# HELP sandfort_things_total Things that happened.\n"
        "# TYPE sandfort_things_total counter\n"
        "sandfort_things_total{kind=\"a\",code=\"200\"} 3\n"
        "sandfort_things_total{kind=\"b\",code=\"404\"} 1\n");
}

TEST_CASE("metrics: a family without labels reads 0 before its first event", "[metrics]") {
  registry r;
  r.counter("sandfort_starts_total", "Starts.", {});
  r.gauge("sandfort_level", "A level.", {}).set({}, 2.5);
  auto text = r.render();
  CHECK(has_line(text, "sandfort_starts_total 0"));
  CHECK(has_line(text, "sandfort_level 2.5"));
}

TEST_CASE("metrics: families render in name order, series in label order", "[metrics]") {
  registry r;
  r.gauge("sandfort_b", "b", {"x"}).set({"2"}, 1);
  r.gauge("sandfort_b", "b", {"x"}).set({"1"}, 1);
  r.gauge("sandfort_a", "a", {}).set({}, 1);
  auto lines = lines_of(r.render());
  REQUIRE(lines.size() == 7);
  CHECK(lines[0] == "# HELP sandfort_a a");
  CHECK(lines[3] == "# HELP sandfort_b b");
  CHECK(lines[5] == "sandfort_b{x=\"1\"} 1");
  CHECK(lines[6] == "sandfort_b{x=\"2\"} 1");
}

TEST_CASE("metrics: label values and HELP text are escaped", "[metrics]") {
  CHECK(escape_label_value(R"(a\b)") == R"(a\\b)");
  CHECK(escape_label_value("say \"hi\"") == R"(say \"hi\")");
  CHECK(escape_label_value("two\nlines") == R"(two\nlines)");
  CHECK(escape_label_value("plain /v1/sandboxes/{id}") == "plain /v1/sandboxes/{id}");
  CHECK(escape_help("back\\slash \"quotes\" stay\nnext") == "back\\\\slash \"quotes\" stay\\nnext");

  registry r;
  r.gauge("sandfort_odd", "Odd values:\nescaped.", {"v"}).set({"q\"b\\n\nx"}, 1);
  auto text = r.render();
  CHECK(has_line(text, "# HELP sandfort_odd Odd values:\\nescaped."));
  CHECK(has_line(text, R"(sandfort_odd{v="q\"b\\n\nx"} 1)"));
  CHECK(lines_of(text).size() == 3);  // the newline in the value did not break the line
}

TEST_CASE("metrics: values render as Prometheus parses them", "[metrics]") {
  CHECK(format_value(0) == "0");
  CHECK(format_value(42) == "42");
  CHECK(format_value(0.001) == "0.001");
  CHECK(format_value(2.5) == "2.5");
  CHECK(format_value(-3) == "-3");
  CHECK(std::stod(format_value(123456789.125)) == 123456789.125);  // round trip, no precision lost
  CHECK(format_value(std::numeric_limits<double>::infinity()) == "+Inf");
  CHECK(format_value(-std::numeric_limits<double>::infinity()) == "-Inf");
  CHECK(format_value(std::nan("")) == "NaN");
}

TEST_CASE("metrics: histogram buckets are cumulative, le is inclusive, +Inf counts everything", "[metrics]") {
  registry r;
  auto& h = r.histogram("sandfort_wait_seconds", "Waits.", {"op"}, {0.1, 1, 0.5});  // unsorted on purpose
  for (double v : {0.05, 0.1, 0.3, 0.5, 0.7, 2.0, 100.0}) h.observe({"x"}, v);
  h.observe({"x"}, std::nan(""));  // not an observation
  CHECK(h.count({"x"}) == 7);
  CHECK(h.sum({"x"}) == Approx(103.65));
  CHECK(r.render() ==
        "# HELP sandfort_wait_seconds Waits.\n"
        "# TYPE sandfort_wait_seconds histogram\n"
        "sandfort_wait_seconds_bucket{op=\"x\",le=\"0.1\"} 2\n"
        "sandfort_wait_seconds_bucket{op=\"x\",le=\"0.5\"} 4\n"
        "sandfort_wait_seconds_bucket{op=\"x\",le=\"1\"} 5\n"
        "sandfort_wait_seconds_bucket{op=\"x\",le=\"+Inf\"} 7\n"
        "sandfort_wait_seconds_sum{op=\"x\"} 103.65\n"
        "sandfort_wait_seconds_count{op=\"x\"} 7\n");
}

TEST_CASE("metrics: the latency buckets run from 1 ms to 60 s", "[metrics]") {
  auto b = latency_buckets();
  REQUIRE(b.size() >= 10);
  CHECK(b.front() == 0.001);
  CHECK(b.back() == 60);
  CHECK(std::is_sorted(b.begin(), b.end()));

  registry r;
  auto& h = r.histogram("sandfort_latency_seconds", "Latency.", {});
  h.observe({}, 0.0004);
  h.observe({}, 90);
  auto text = r.render();
  CHECK(has_line(text, "sandfort_latency_seconds_bucket{le=\"0.001\"} 1"));
  CHECK(has_line(text, "sandfort_latency_seconds_bucket{le=\"60\"} 1"));
  CHECK(has_line(text, "sandfort_latency_seconds_bucket{le=\"+Inf\"} 2"));
}

TEST_CASE("metrics: a timer observes once, with the labels it ends with", "[metrics]") {
  registry r;
  auto& h = r.histogram("sandfort_calls_seconds", "Calls.", {"outcome"});
  {
    timer t(h, {"error"});
    t.values()[0] = "ok";
    t.stop();
    t.stop();
  }
  CHECK(h.count({"ok"}) == 1);
  CHECK(h.count({"error"}) == 0);
  { timer t(h, {"error"}); }
  CHECK(h.count({"error"}) == 1);
}

TEST_CASE("metrics: the number of series is capped, the rest is counted as overflow", "[metrics]") {
  registry r;
  auto& c = r.counter("sandfort_requests_total", "Requests.", {"route", "code"}, 10);
  for (int i = 0; i < 10000; ++i) c.inc({"/v1/sandboxes/sbx-" + std::to_string(i), "200"});
  CHECK(c.series_count() == 10);
  CHECK(c.value({overflow_label, overflow_label}) == 10000 - 9);
  c.inc({"/v1/sandboxes/sbx-3", "200"});  // an existing series still counts as itself
  CHECK(c.value({"/v1/sandboxes/sbx-3", "200"}) == 2);
  CHECK(lines_of(r.render()).size() == 2 + 10);

  auto& h = r.histogram("sandfort_capped_seconds", "Capped.", {"id"}, {1}, 3);
  for (int i = 0; i < 100; ++i) h.observe({std::to_string(i)}, 0.5);
  CHECK(h.series_count() == 3);
  CHECK(h.count({overflow_label}) == 98);
}

TEST_CASE("metrics: clearing a gauge forgets its series", "[metrics]") {
  registry r;
  auto& g = r.gauge("sandfort_pool_ready", "Ready.", {"image"});
  g.set({"a"}, 1);
  g.set({"b"}, 2);
  g.clear();
  g.set({"b"}, 3);
  auto text = r.render();
  CHECK_FALSE(has_line(text, "sandfort_pool_ready{image=\"a\"} 1"));
  CHECK(has_line(text, "sandfort_pool_ready{image=\"b\"} 3"));
}

TEST_CASE("metrics: registration returns the same family, refuses conflicts and bad names", "[metrics]") {
  registry r;
  auto& a = r.counter("sandfort_x_total", "X.", {"l"});
  CHECK(&r.counter("sandfort_x_total", "X.", {"l"}) == &a);
  CHECK_THROWS_AS(r.gauge("sandfort_x_total", "X.", {"l"}), std::invalid_argument);
  CHECK_THROWS_AS(r.counter("sandfort_x_total", "X.", {"other"}), std::invalid_argument);
  CHECK_THROWS_AS(r.counter("9starts_with_digit", "", {}), std::invalid_argument);
  CHECK_THROWS_AS(r.counter("has-dash", "", {}), std::invalid_argument);
  CHECK_THROWS_AS(r.counter("sandfort_y_total", "", {"bad-label"}), std::invalid_argument);
  CHECK_THROWS_AS(r.counter("sandfort_y_total", "", {"__reserved"}), std::invalid_argument);
  CHECK_THROWS_AS(r.histogram("sandfort_h", "", {"le"}), std::invalid_argument);
  CHECK_NOTHROW(r.counter("sandfort:recorded_rule", "", {"le"}));  // le is only reserved in histograms
  CHECK_THROWS_AS(a.inc({"one", "too many"}), std::invalid_argument);
}

TEST_CASE("metrics: families may be used from several threads", "[metrics]") {
  registry r;
  auto& c = r.counter("sandfort_parallel_total", "Parallel.", {"t"});
  auto& h = r.histogram("sandfort_parallel_seconds", "Parallel.", {});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10000; ++i) {
        c.inc({std::to_string(t % 2)});
        h.observe({}, 0.002);
        if (i % 1000 == 0) (void)r.render();
      }
    });
  for (auto& th : threads) th.join();
  CHECK(c.value({"0"}) + c.value({"1"}) == 40000);
  CHECK(h.count({}) == 40000);
}

TEST_CASE("metrics: the process's registry is one", "[metrics]") {
  CHECK(&default_registry() == &default_registry());
  CHECK(std::string(content_type) == "text/plain; version=0.0.4; charset=utf-8");
}
