#!/usr/bin/env bash
# A walk through the `sandfort` CLI: create a sandbox, run commands, copy files up and down,
# snapshot it, start a second sandbox from the snapshot, clean everything up.
#
#   export SANDFORT_BASE_URL=http://127.0.0.1:8080 SANDFORT_API_KEY=sfk_...   # or: sandfort login
#   examples/cli/walkthrough.sh
#
# The binary: $SANDFORT_CLI, else `sandfort` on PATH, else build/cli/sandfort of this repository.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ -n "${SANDFORT_CLI:-}" ]]; then
  sandfort="$SANDFORT_CLI"
elif command -v sandfort >/dev/null 2>&1; then
  sandfort="$(command -v sandfort)"
else
  sandfort="$here/../../build/cli/sandfort"
fi
[[ -x "$sandfort" ]] || { echo "no sandfort binary (set SANDFORT_CLI or build build/cli/sandfort)" >&2; exit 1; }

step() { echo; echo "==> $*"; }
work="$(mktemp -d)"
sbx="" ; sbx2="" ; snap="walkthrough-$$-$RANDOM"
cleanup() {
  status=$?
  step "cleaning up"
  [[ -n "$sbx2" ]] && "$sandfort" sandbox rm "$sbx2" || true
  [[ -n "$sbx" ]] && "$sandfort" sandbox rm "$sbx" || true
  "$sandfort" snapshot rm "$snap" 2>/dev/null || true
  rm -rf "$work"
  exit $status
}
trap cleanup EXIT

step "$sandfort whoami"
"$sandfort" whoami

step "sandfort sandbox create --wait   (prints the new sandbox's id)"
sbx="$("$sandfort" sandbox create --wait)"
echo "created $sbx"

step "sandfort sandbox get $sbx"
"$sandfort" sandbox get "$sbx"

step "sandfort exec $sbx -- python3 -c 'print(21 * 2)'"
out="$("$sandfort" exec "$sbx" -- python3 -c 'print(21 * 2)')"
echo "$out"
[[ "$out" == "42" ]]

step "sandfort exec exits with the command's status (sh -c 'exit 7')"
set +e
"$sandfort" exec "$sbx" -- sh -c 'echo about to fail >&2; exit 7'
status=$?
set -e
echo "exit status: $status"
[[ $status -eq 7 ]]

step "sandfort cp: a file and a directory up"
mkdir -p "$work/up/src"
printf 'print("hello from an uploaded file")\n' > "$work/up/src/hello.py"
printf 'data\n' > "$work/up/src/data.txt"
"$sandfort" cp "$work/up/src/hello.py" "$sbx:/work/hello.py"
"$sandfort" cp "$work/up/src" "$sbx:/work/src"
"$sandfort" exec "$sbx" -- ls -l /work /work/src
"$sandfort" exec "$sbx" -- python3 /work/hello.py

step "sandfort exec: make a file inside, then cp it down"
"$sandfort" exec --cwd /work "$sbx" -- sh -c 'python3 src/hello.py > result.txt && wc -c result.txt'
"$sandfort" cp "$sbx:/work/result.txt" "$work/result.txt"
echo "downloaded: $(cat "$work/result.txt")"
[[ "$(cat "$work/result.txt")" == "hello from an uploaded file" ]]
"$sandfort" cp "$sbx:/work/src" "$work/down"
diff -r "$work/up/src" "$work/down"
echo "directory round trip identical"

step "sandfort snapshot create $sbx $snap"
"$sandfort" snapshot create "$sbx" "$snap"
"$sandfort" snapshot ls

step "sandfort sandbox create --wait --snapshot $snap   (the files come along)"
sbx2="$("$sandfort" sandbox create --wait --snapshot "$snap")"
echo "created $sbx2 from $snap"
out="$("$sandfort" exec "$sbx2" -- cat /work/result.txt)"
echo "$out"
[[ "$out" == "hello from an uploaded file" ]]

step "sandfort sandbox ls"
"$sandfort" sandbox ls

step "sandfort sandbox rm $sbx2 $sbx; sandfort snapshot rm $snap"
"$sandfort" sandbox rm "$sbx2" "$sbx"
gone="$sbx" ; sbx="" ; sbx2=""
"$sandfort" snapshot rm "$snap"

step "sandfort sandbox get $gone   (deleted: fails with not_found)"
if "$sandfort" sandbox get "$gone"; then echo "still there" >&2; exit 1; fi
echo
echo "CLI walkthrough OK"
