#include "sandfort/audit/chain.hpp"

#include <stdexcept>

#include "canonical.hpp"
#include "event_form.hpp"
#include "sandfort/crypto/digest.hpp"

namespace sandfort::audit {

const std::string& genesis_hash() {
  static const std::string genesis(64, '0');
  return genesis;
}

result<std::string> canonical_details(std::string_view details) {
  auto parsed = detail::parse_details(details);
  if (!parsed) return std::move(parsed).err();
  auto out = detail::canonical_dump(*parsed);
  if (!out) return make_error(errc::invalid_argument, "details: " + out.err().message);
  return out;
}

namespace detail {

result<canonical_forms> canonical_forms_of(const audit::event_record& e) {
  auto parsed = parse_details(e.details);
  if (!parsed) return std::move(parsed).err();
  auto details = canonical_dump(*parsed);
  if (!details) return make_error(errc::invalid_argument, "details: " + details.err().message);
  auto event = canonical_event(e, *details);
  if (!event) return std::move(event).err();
  return canonical_forms{std::move(*event), std::move(*details)};
}

result<std::string> canonical_event(const audit::event_record& e, std::string_view canonical_details) {
  // The keys in code point order; the Python cross-check in the tests holds this order to account.
  std::string out;
  out.reserve(canonical_details.size() + 512);
  bool valid = true;
  const auto field = [&](const char* key, std::string_view value) {
    out += key;
    valid = append_string(out, value) && valid;
  };
  field(R"({"action":)", e.action);
  field(R"(,"actor":)", e.actor);
  out += R"(,"details":)";
  out += canonical_details;
  field(R"(,"org_id":)", e.org_id);
  field(R"(,"outcome":)", e.outcome);
  field(R"(,"prev_hash":)", e.prev_hash);
  field(R"(,"request_id":)", e.request_id);
  out += R"(,"seq":)";
  out += std::to_string(e.seq);
  field(R"(,"source":)", e.source);
  field(R"(,"target":)", e.target);
  field(R"(,"ts":)", e.ts);
  out += '}';
  if (!valid) return make_error(errc::invalid_argument, "a field is not valid UTF-8");
  if (e.seq < -max_safe_integer || e.seq > max_safe_integer) return make_error(errc::invalid_argument, "seq out of range");
  return out;
}

}  // namespace detail

result<std::string> try_canonical_json(const audit::event_record& e) {
  auto forms = detail::canonical_forms_of(e);
  if (!forms) return std::move(forms).err();
  return std::move(forms->event);
}

std::string canonical_json(const audit::event_record& e) {
  auto out = try_canonical_json(e);
  if (!out) throw std::invalid_argument("audit event has no canonical form: " + out.err().message);
  return std::move(out).value();
}

namespace {

// An event's link: SHA-256 of the previous hash followed by the event's canonical JSON.
std::string link_hash(std::string_view prev_hash, std::string_view canonical_event) {
  std::string input(prev_hash);
  input += canonical_event;
  return sha256_hex(input);
}

}  // namespace

std::string chain_hash(std::string_view prev_hash, const audit::event_record& e) {
  return link_hash(prev_hash, canonical_json(e));
}

result<void> seal(audit::event_record& e, const audit::chain_head& head) {
  if (e.org_id.empty()) return make_error(errc::invalid_argument, "audit event without an organization");
  if (head.seq < 0 || (head.seq == 0 && !head.hash.empty() && head.hash != genesis_hash()) ||
      (head.seq > 0 && head.hash.empty()))
    return make_error(errc::invalid_argument, "inconsistent chain head");
  auto details = canonical_details(e.details.empty() ? std::string_view("{}") : std::string_view(e.details));
  if (!details) return std::move(details).err();

  audit::event_record sealed = e;
  for (std::string* field : {&sealed.org_id, &sealed.ts, &sealed.actor, &sealed.action, &sealed.target,
                             &sealed.outcome, &sealed.request_id, &sealed.source})
    if (!detail::valid_utf8(*field)) *field = detail::repair_utf8(*field);
  sealed.details = std::move(*details);
  sealed.seq = head.seq + 1;
  sealed.prev_hash = head.seq == 0 ? genesis_hash() : head.hash;
  // chain_hash() of it, without parsing the details just made canonical a second time.
  auto event = detail::canonical_event(sealed, sealed.details);
  if (!event) return std::move(event).err();
  sealed.hash = link_hash(sealed.prev_hash, *event);
  e = std::move(sealed);
  return {};
}

}  // namespace sandfort::audit
