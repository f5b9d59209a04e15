#include "sandfort/metrics/registry.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <stdexcept>

namespace sandfort::metrics {

namespace {

bool valid_name(const std::string& s, bool colon_allowed) {
  if (s.empty()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon_allowed && c == ':') ||
              (i > 0 && c >= '0' && c <= '9');
    if (!ok) return false;
  }
  return true;
}

const char* type_name(kind k) {
  switch (k) {
    case kind::counter: return "counter";
    case kind::gauge: return "gauge";
    case kind::histogram: return "histogram";
  }
  return "untyped";
}

// name{a="x",b="y"} — `extra` is one more label already formatted (a histogram's le="…").
void sample(std::string& out, const std::string& name, const std::vector<std::string>& names,
            const label_values& values, const std::string& extra, const std::string& value) {
  out += name;
  if (!names.empty() || !extra.empty()) {
    out += '{';
    for (std::size_t i = 0; i < names.size(); ++i) {
      if (i > 0) out += ',';
      out += names[i];
      out += "=\"";
      out += escape_label_value(values[i]);
      out += '"';
    }
    if (!extra.empty()) {
      if (!names.empty()) out += ',';
      out += extra;
    }
    out += '}';
  }
  out += ' ';
  out += value;
  out += '\n';
}

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

std::vector<double> latency_buckets() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

std::string escape_label_value(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '"') out += "\\\"";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string escape_help(const std::string& v) {
  std::string out;
  out.reserve(v.size());
  for (char c : v) {
    if (c == '\\') out += "\\\\";
    else if (c == '\n') out += "\\n";
    else out += c;
  }
  return out;
}

std::string format_value(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // shortest form that reads back the same
  if (ec != std::errc()) return "NaN";
  return std::string(buf, end);
}

// --- family -------------------------------------------------------------------------------------

family::family(kind k, std::string name, std::string help, std::vector<std::string> label_names,
               std::vector<double> buckets, std::size_t max_series)
    : kind_(k),
      name_(std::move(name)),
      help_(std::move(help)),
      label_names_(std::move(label_names)),
      bounds_(std::move(buckets)),
      max_series_(std::max<std::size_t>(max_series, 1)) {
  if (!valid_name(name_, true)) throw std::invalid_argument("metric name \"" + name_ + "\" is not valid");
  for (const auto& l : label_names_)
    if (!valid_name(l, false) || l.rfind("__", 0) == 0 || (kind_ == kind::histogram && l == "le"))
      throw std::invalid_argument(name_ + ": label name \"" + l + "\" is not valid");
  if (kind_ == kind::histogram) {
    std::sort(bounds_.begin(), bounds_.end());
    bounds_.erase(std::unique(bounds_.begin(), bounds_.end()), bounds_.end());
    // +Inf is always there as the last bucket: a bound of +Inf (or NaN) given here would repeat it.
    std::erase_if(bounds_, [](double b) { return !std::isfinite(b); });
  }
  // A family without labels has its one series from the start: a counter reads 0 before its
  // first event rather than missing (so rate() sees the first one).
  if (label_names_.empty()) at({});
}

std::size_t family::series_count() const {
  std::lock_guard lock(mutex_);
  return series_.size();
}

family::series& family::at(const label_values& values) {
  if (values.size() != label_names_.size())
    throw std::invalid_argument(name_ + ": " + std::to_string(values.size()) + " label values for " +
                                std::to_string(label_names_.size()) + " labels");
  if (auto it = series_.find(values); it != series_.end()) return it->second;
  // Past the cap, every new list of values is counted in the overflow series; the cap keeps a
  // place for it, so there are at most max_series_ series in all.
  const label_values overflow(label_names_.size(), overflow_label);
  const label_values& key = series_.size() + 1 < max_series_ ? values : overflow;
  auto it = series_.try_emplace(key).first;
  if (kind_ == kind::histogram && it->second.buckets.empty()) it->second.buckets.assign(bounds_.size(), 0);
  return it->second;
}

void family::render(std::string& out) const {
  std::lock_guard lock(mutex_);
  out += "# HELP " + name_ + " " + escape_help(help_) + "\n";
  out += "# TYPE " + name_ + " " + type_name(kind_) + "\n";
  for (const auto& [values, s] : series_) {
    if (kind_ != kind::histogram) {
      sample(out, name_, label_names_, values, "", format_value(s.value));
      continue;
    }
    std::uint64_t cumulative = 0;
    for (std::size_t i = 0; i < bounds_.size(); ++i) {
      cumulative += s.buckets[i];
      sample(out, name_ + "_bucket", label_names_, values, "le=\"" + format_value(bounds_[i]) + "\"",
             std::to_string(cumulative));
    }
    sample(out, name_ + "_bucket", label_names_, values, "le=\"+Inf\"", std::to_string(s.count));
    sample(out, name_ + "_sum", label_names_, values, "", format_value(s.sum));
    sample(out, name_ + "_count", label_names_, values, "", std::to_string(s.count));
  }
}

void counter_family::inc(const label_values& values, double by) {
  if (!(by >= 0)) return;
  std::lock_guard lock(mutex_);
  at(values).value += by;
}

double counter_family::value(const label_values& values) const {
  std::lock_guard lock(mutex_);
  auto it = series_.find(values);
  return it == series_.end() ? 0 : it->second.value;
}

void gauge_family::set(const label_values& values, double v) {
  std::lock_guard lock(mutex_);
  at(values).value = v;
}

void gauge_family::clear() {
  std::lock_guard lock(mutex_);
  series_.clear();
  if (label_names_.empty()) at({});
}

double gauge_family::value(const label_values& values) const {
  std::lock_guard lock(mutex_);
  auto it = series_.find(values);
  return it == series_.end() ? 0 : it->second.value;
}

void histogram_family::observe(const label_values& values, double v) {
  if (std::isnan(v)) return;
  std::lock_guard lock(mutex_);
  auto& s = at(values);
  // The first bucket whose upper bound is >= v (le: "less than or equal"); none: only +Inf.
  auto bucket = std::lower_bound(bounds_.begin(), bounds_.end(), v);
  if (bucket != bounds_.end()) ++s.buckets[static_cast<std::size_t>(bucket - bounds_.begin())];
  s.sum += v;
  ++s.count;
}

std::uint64_t histogram_family::count(const label_values& values) const {
  std::lock_guard lock(mutex_);
  auto it = series_.find(values);
  return it == series_.end() ? 0 : it->second.count;
}

double histogram_family::sum(const label_values& values) const {
  std::lock_guard lock(mutex_);
  auto it = series_.find(values);
  return it == series_.end() ? 0 : it->second.sum;
}

// --- registry -----------------------------------------------------------------------------------

family& registry::find_or_add(kind k, const std::string& name, const std::string& help,
                              std::vector<std::string> label_names, std::vector<double> buckets,
                              std::size_t max_series) {
  std::lock_guard lock(mutex_);
  if (auto it = families_.find(name); it != families_.end()) {
    if (it->second->type() != k || it->second->label_names() != label_names)
      throw std::invalid_argument("metric " + name + " is already registered with another type or labels");
    return *it->second;
  }
  std::unique_ptr<family> f;
  switch (k) {
    case kind::counter:
      f = std::make_unique<counter_family>(k, name, help, std::move(label_names), std::move(buckets), max_series);
      break;
    case kind::gauge:
      f = std::make_unique<gauge_family>(k, name, help, std::move(label_names), std::move(buckets), max_series);
      break;
    case kind::histogram:
      f = std::make_unique<histogram_family>(k, name, help, std::move(label_names), std::move(buckets), max_series);
      break;
  }
  return *families_.emplace(name, std::move(f)).first->second;
}

counter_family& registry::counter(const std::string& name, const std::string& help,
                                  std::vector<std::string> label_names, std::size_t max_series) {
  return static_cast<counter_family&>(find_or_add(kind::counter, name, help, std::move(label_names), {}, max_series));
}

gauge_family& registry::gauge(const std::string& name, const std::string& help, std::vector<std::string> label_names,
                              std::size_t max_series) {
  return static_cast<gauge_family&>(find_or_add(kind::gauge, name, help, std::move(label_names), {}, max_series));
}

histogram_family& registry::histogram(const std::string& name, const std::string& help,
                                      std::vector<std::string> label_names, std::vector<double> buckets,
                                      std::size_t max_series) {
  return static_cast<histogram_family&>(
      find_or_add(kind::histogram, name, help, std::move(label_names), std::move(buckets), max_series));
}

std::string registry::render() const {
  std::lock_guard lock(mutex_);
  std::string out;
  for (const auto& [name, f] : families_) f->render(out);
  return out;
}

registry& default_registry() {
  static registry r;
  return r;
}

// --- timer --------------------------------------------------------------------------------------

timer::timer(histogram_family& h, label_values values) : h_(h), values_(std::move(values)), started_ns_(now_ns()) {}

void timer::stop() {
  if (stopped_) return;
  stopped_ = true;
  h_.observe(values_, static_cast<double>(now_ns() - started_ns_) / 1e9);
}

}  // namespace sandfort::metrics
