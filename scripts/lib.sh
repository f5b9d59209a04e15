# shellcheck shell=bash
# Shared helpers for the Sandfort scripts. Source it; do not execute it.
#   source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# Absolute path of the repository root (the parent of scripts/).
SF_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"

# Overridable only so the dockerd start-up logic can be exercised against a stand-in.
SF_DOCKER_SOCK=${SF_DOCKER_SOCK:-/var/run/docker.sock}
SF_DOCKER_PIDFILE=${SF_DOCKER_PIDFILE:-/var/run/docker.pid}
# shellcheck disable=SC2034 # used by the scripts that source this file
SF_BASE_IMAGE=sandfort/base:bookworm # the default sandbox image
# Raised whenever build-base-image changes what goes in, so setup rebuilds older images.
SF_BASE_IMAGE_LABEL=io.sandfort.base-image-version
SF_BASE_IMAGE_VERSION=4
# shellcheck disable=SC2034 # used by the scripts that source this file
SF_CODE_IMAGE=sandfort/code-interpreter:bookworm # the code-interpreter template (docs/images.md)
SF_CODE_IMAGE_LABEL=io.sandfort.code-interpreter-image-version
SF_CODE_IMAGE_VERSION=1

# sf_log PREFIX MESSAGE... — one short progress line on stdout, "PREFIX: MESSAGE".
sf_log() {
  local prefix=$1
  shift
  printf '%s: %s\n' "$prefix" "$*"
}

# sf_die PREFIX MESSAGE... — print an error on stderr and exit 1.
sf_die() {
  local prefix=$1
  shift
  printf '%s: error: %s\n' "$prefix" "$*" >&2
  exit 1
}

# sf_build_dir — absolute build directory, honouring SANDFORT_BUILD_DIR and SANDFORT_SANITIZE.
# A relative SANDFORT_BUILD_DIR is taken relative to the repository root.
sf_build_dir() {
  local dir
  if [[ -n "${SANDFORT_BUILD_DIR:-}" ]]; then
    dir=$SANDFORT_BUILD_DIR
  elif [[ -n "${SANDFORT_SANITIZE:-}" ]]; then
    dir=build-sanitize
  else
    dir=build
  fi
  [[ $dir == /* ]] || dir="$SF_ROOT/$dir"
  printf '%s\n' "$dir"
}

# sf_docker_ping — true when the Docker Engine answers on its unix socket.
sf_docker_ping() {
  curl -sf --max-time 5 --unix-socket "$SF_DOCKER_SOCK" http://d/_ping >/dev/null 2>&1
}

# sf_ensure_dockerd PREFIX — start dockerd if nothing answers on the socket, wait up to 60 s.
sf_ensure_dockerd() {
  local prefix=$1 log=/var/log/sandfort-dockerd.log pid=""
  if sf_docker_ping; then
    sf_log "$prefix" "Docker answers on $SF_DOCKER_SOCK"
    return 0
  fi

  command -v dockerd >/dev/null 2>&1 || sf_die "$prefix" "dockerd is not installed (package docker.io)"

  if [[ "$(cat /proc/1/comm 2>/dev/null)" == systemd ]]; then
    sf_log "$prefix" "starting Docker with systemctl"
    systemctl start docker || true
  fi

  if ! sf_docker_ping; then
    # A dockerd that is still starting up (e.g. launched by a concurrent run) owns its pid file.
    if [[ -r $SF_DOCKER_PIDFILE ]]; then
      pid=$(cat "$SF_DOCKER_PIDFILE" 2>/dev/null || true)
      if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
        sf_log "$prefix" "dockerd (pid $pid) is already running; waiting for it"
      else
        pid=""
      fi
    fi
    if [[ -z $pid ]]; then
      sf_log "$prefix" "starting dockerd in the background (log: $log)"
      setsid dockerd >"$log" 2>&1 </dev/null 9>&- &
      pid=$!
    fi
  fi

  local i
  for ((i = 0; i < 120; i++)); do
    sf_docker_ping && { sf_log "$prefix" "Docker is up"; return 0; }
    if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
      sf_docker_ping && return 0
      tail -n 20 "$log" >&2 2>/dev/null || true
      sf_die "$prefix" "dockerd exited during start-up; see $log"
    fi
    sleep 0.5
  done
  tail -n 20 "$log" >&2 2>/dev/null || true
  sf_die "$prefix" "Docker did not answer on $SF_DOCKER_SOCK within 60 s; see $log"
}

# sf_ensure_gvisor PREFIX — installs Debian's runsc when missing and registers it with the Docker
# Engine as the runtime "runsc" (/etc/docker/daemon.json, other keys kept), reloading dockerd
# with SIGHUP (running containers are not restarted) only when the file changed. The flags:
#   --network=none     runsc here runs only without its own network stack; a gVisor sandbox has
#                      no interface at all, its agent dials home (docs/architecture.md)
#   --host-uds=open    a process in the sandbox may connect to a host socket in a mounted
#                      directory: the agent's door, mounted read-only
#   --file-access=shared  the host's writes into the root filesystem (the Engine's archive API)
#                      are seen inside at once
# Returns non-zero, saying why, when gVisor cannot be offered.
SF_RUNSC_ARGS='["--network=none", "--host-uds=open", "--file-access=shared"]'
sf_ensure_gvisor() {
  local prefix=$1 config=/etc/docker/daemon.json
  if ! command -v runsc >/dev/null 2>&1; then
    sf_log "$prefix" "installing runsc (gVisor) from Debian"
    # The package lists may predate runsc (a machine whose packages were all present skips
    # setup's `apt-get update`): refreshed once when the first try does not find it.
    if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends runsc >/dev/null 2>&1; then
      apt-get update -q >/dev/null 2>&1 || true
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends runsc >/dev/null 2>&1 || {
        sf_log "$prefix" "runsc could not be installed"
        return 1
      }
    fi
  fi
  local changed
  changed=$(SF_RUNSC_PATH=$(command -v runsc) SF_RUNSC_ARGS=$SF_RUNSC_ARGS python3 - "$config" <<'PY'
import json, os, sys
path = sys.argv[1]
try:
    with open(path) as f:
        config = json.load(f)
except FileNotFoundError:
    config = {}
want = {"path": os.environ["SF_RUNSC_PATH"], "runtimeArgs": json.loads(os.environ["SF_RUNSC_ARGS"])}
if config.get("runtimes", {}).get("runsc") == want:
    print("no")
else:
    config.setdefault("runtimes", {})["runsc"] = want
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".tmp", "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)
    print("yes")
PY
  ) || { sf_log "$prefix" "cannot update $config"; return 1; }
  if [[ $changed == yes ]]; then
    sf_log "$prefix" "registered runsc with the Docker Engine ($config); reloading dockerd"
    pkill -HUP -x dockerd || true
    local i
    for ((i = 0; i < 20; i++)); do
      docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"' && break
      sleep 0.5
    done
  fi
  if ! docker info --format '{{json .Runtimes}}' 2>/dev/null | grep -q '"runsc"'; then
    sf_log "$prefix" "the Docker Engine does not list the runsc runtime"
    return 1
  fi
  sf_log "$prefix" "gVisor: runsc $(runsc --version 2>/dev/null | head -n1 | awk '{print $3}') is the Engine's runtime \"runsc\""
}
