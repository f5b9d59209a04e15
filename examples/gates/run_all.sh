#!/usr/bin/env bash
# Runs every gate against the deployment at SANDFORT_BASE_URL with SANDFORT_API_KEY; exits 1 if
# any gate failed. Each gate prints one PASS/FAIL (or SKIP) line per check.
#
#   export SANDFORT_BASE_URL=http://127.0.0.1:8080 SANDFORT_API_KEY=sfk_...     # a superadmin key covers every gate
#   export SANDFORT_GATE_ALLOWED_URL=https://example.com/                      # an allowlisted target (egress)
#   export SANDFORT_GATE_UPSTREAM=local        # offline: the egress gate serves its own target (examples/README.md)
#   examples/gates/run_all.sh [GATE...]                                        # default: all, in this order
#
# Optional: SANDFORT_GATE_OTHER_API_KEY (tenancy without a superadmin key), SANDFORT_GATE_AUDIT_PUBLIC_KEY,
# SANDFORT_GATE_SANDFORTD_CONFIG (audit-verify on the daemon's host), SANDFORT_GATE_STRICT=1 (a SKIP fails).
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="${PYTHON:-python3}"
gates=("$@")
[[ ${#gates[@]} -gt 0 ]] || gates=(isolation egress tenancy audit speed)
failed=()
for g in "${gates[@]}"; do
  echo "=== gate: $g"
  if ! "$python" "$here/$g.py"; then
    failed+=("$g")
  fi
done
echo "==="
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "FAILED gates: ${failed[*]}"
  exit 1
fi
echo "all gates passed: ${gates[*]}"
