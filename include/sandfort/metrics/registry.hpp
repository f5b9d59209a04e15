#pragma once
// Prometheus metrics: counters, gauges and histograms with labels, rendered in the text
// exposition format 0.0.4 (what `GET /metrics` answers).
//
// A family is a metric name with a fixed list of label names; each distinct list of label values
// is one series. Label values must come from small, fixed sets (a route pattern, never a path
// with an id in it): each family also caps its series (max_series), and label values beyond the
// cap are counted together in one series whose every label is "overflow", so a bug that puts an
// id into a label costs a bounded amount of memory and scrape time.
//
// sandfortd serves from one io_context thread, but a few parts run elsewhere (the Docker engine
// may be shared across threads, the background reader and the firewall worker have threads of
// their own), so every family guards its series with a mutex: uncontended, it costs a few
// nanoseconds next to the work being measured.

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace sandfort::metrics {

using label_values = std::vector<std::string>;

constexpr std::size_t default_max_series = 1000;
// What a series past the cap is counted as, in every label.
inline constexpr const char* overflow_label = "overflow";

// Upper bounds of latency buckets, in seconds: 1 ms to 60 s (the longest exec a default
// configuration allows is longer, and lands in +Inf).
std::vector<double> latency_buckets();

enum class kind { counter, gauge, histogram };

class family {
 public:
  family(kind k, std::string name, std::string help, std::vector<std::string> label_names,
         std::vector<double> buckets, std::size_t max_series);
  virtual ~family() = default;
  family(const family&) = delete;
  family& operator=(const family&) = delete;

  const std::string& name() const { return name_; }
  kind type() const { return kind_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  std::size_t series_count() const;
  // Appends this family's HELP, TYPE and samples in the text format.
  void render(std::string& out) const;

 protected:
  struct series {
    double value = 0;                    // counter, gauge
    std::vector<std::uint64_t> buckets;  // histogram: observations per bucket, not cumulative
    double sum = 0;
    std::uint64_t count = 0;
  };
  // The series of these values (created at first use, or the overflow series past the cap).
  // Call with mutex_ held. Values of the wrong arity throw std::invalid_argument.
  series& at(const label_values& values);

  kind kind_;
  std::string name_;
  std::string help_;
  std::vector<std::string> label_names_;
  std::vector<double> bounds_;  // histogram bucket upper bounds, ascending, without +Inf
  std::size_t max_series_;
  mutable std::mutex mutex_;
  std::map<label_values, series> series_;

  friend class registry;
};

class counter_family final : public family {
 public:
  using family::family;
  // Adds `by` (>= 0; a negative amount is ignored: counters only go up).
  void inc(const label_values& values, double by = 1);
  double value(const label_values& values) const;  // 0 for a series never touched
};

class gauge_family final : public family {
 public:
  using family::family;
  void set(const label_values& values, double v);
  // Forgets every series: a gauge computed at scrape time starts from nothing, so that a pool
  // removed from the configuration is not reported forever.
  void clear();
  double value(const label_values& values) const;
};

class histogram_family final : public family {
 public:
  using family::family;
  void observe(const label_values& values, double v);
  std::uint64_t count(const label_values& values) const;
  double sum(const label_values& values) const;
};

class registry {
 public:
  // The family of that name, created on first call. Calling again with the same name, type and
  // labels returns the same family (modules may look one up more than once); anything else
  // throws std::invalid_argument, as does a name or label name Prometheus would not accept.
  counter_family& counter(const std::string& name, const std::string& help, std::vector<std::string> label_names,
                          std::size_t max_series = default_max_series);
  gauge_family& gauge(const std::string& name, const std::string& help, std::vector<std::string> label_names,
                      std::size_t max_series = default_max_series);
  histogram_family& histogram(const std::string& name, const std::string& help, std::vector<std::string> label_names,
                              std::vector<double> buckets = latency_buckets(),
                              std::size_t max_series = default_max_series);

  // Every family, by name, in the text exposition format 0.0.4.
  std::string render() const;

 private:
  family& find_or_add(kind k, const std::string& name, const std::string& help, std::vector<std::string> label_names,
                      std::vector<double> buckets, std::size_t max_series);

  mutable std::mutex mutex_;
  std::map<std::string, std::unique_ptr<family>> families_;
};

// The process's registry: every module reports here and `GET /metrics` renders it.
registry& default_registry();

// The Content-Type of render()'s output.
inline constexpr const char* content_type = "text/plain; version=0.0.4; charset=utf-8";

// Text-format escaping: label values escape \, " and newline; HELP text escapes \ and newline.
std::string escape_label_value(const std::string& v);
std::string escape_help(const std::string& v);
// A sample value as Prometheus parses it: shortest round-trip decimal, +Inf, -Inf, NaN.
std::string format_value(double v);

// Measures from construction to destruction (or to stop()) and observes the seconds once.
class timer {
 public:
  timer(histogram_family& h, label_values values);
  ~timer() { stop(); }
  timer(const timer&) = delete;
  timer& operator=(const timer&) = delete;
  // Observes now; later calls do nothing. Labels can be changed until then (an outcome).
  void stop();
  label_values& values() { return values_; }

 private:
  histogram_family& h_;
  label_values values_;
  std::int64_t started_ns_;
  bool stopped_ = false;
};

}  // namespace sandfort::metrics
