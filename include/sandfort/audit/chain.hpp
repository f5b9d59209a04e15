#pragma once
// The per-organization audit hash chain: hash = SHA-256(prev_hash || canonical JSON of the event).
//
// The canonical JSON of an event is the object of every field but `hash`:
//   {action, actor, details, org_id, outcome, prev_hash, request_id, seq, source, target, ts}
// with `details` parsed and embedded as a JSON object. It is written so that Python's
//   json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
// produces the same bytes, and so can a few lines of JavaScript. The rules:
//  - No whitespace anywhere. Object keys sorted by Unicode code point, which is the byte order of
//    their UTF-8 (Python's str order). JavaScript must compare keys by code point, not with the
//    default sort (UTF-16 units; differs only for keys mixing U+E000..U+FFFF and astral
//    characters), and must write objects itself: JSON.stringify puts integer-like keys
//    ("1", "2") first whatever order they were inserted in.
//  - Strings: UTF-8 as is (no \u escapes for non-ASCII, U+2028/U+2029 and DEL included). Escaped
//    are `"` → \", `\` → \\, and U+0000..U+001F: \b \t \n \f \r by those short forms, every other
//    one as \u00XX with lowercase hex. `/` is not escaped. Invalid UTF-8 has no canonical form.
//    JSON.stringify of a string follows exactly these rules.
//  - Values in details: objects, arrays, strings, integers, true, false, null. No floats (their
//    text differs between languages: 1.0, 1e21), and integers only within ±(2^53 − 1), the range
//    JavaScript's numbers hold exactly; integers are written in plain decimal, -0 as 0.
//  - details must be a JSON object. Nesting deeper than 32 levels has no canonical form.
//  - seq is an integer; every other field a string.
// seal() brings an event into this shape before hashing it (invalid UTF-8 → U+FFFD, details
// re-written canonically), so a sealed event is stored exactly as it was hashed.

#include <cstdint>
#include <string>
#include <string_view>

#include "sandfort/core/error.hpp"
#include "sandfort/audit/records.hpp"

namespace sandfort::audit {

// prev_hash of an organization's first event: 64 '0'.
const std::string& genesis_hash();

// The canonical JSON of e, or invalid_argument when e has none (see the rules above).
result<std::string> try_canonical_json(const audit::event_record& e);
// For events that have a canonical form, e.g. sealed ones; throws std::invalid_argument (a bug) if not.
std::string canonical_json(const audit::event_record& e);

// Lowercase hex SHA-256 of prev_hash followed by the canonical JSON of e (which also holds prev_hash).
std::string chain_hash(std::string_view prev_hash, const audit::event_record& e);

// Makes e the successor of head: seq = head.seq + 1, prev_hash = head's hash (genesis for an
// empty chain: seq 0, hash empty or genesis), invalid UTF-8 in its strings replaced by U+FFFD,
// details re-written in canonical form ("" becomes "{}"), hash computed. invalid_argument when
// org_id is empty, head is inconsistent, or details is not a JSON object within the rules above;
// e is then unchanged.
result<void> seal(audit::event_record& e, const audit::chain_head& head);

// The canonical form of a details text, or invalid_argument.
result<std::string> canonical_details(std::string_view details);

}  // namespace sandfort::audit
