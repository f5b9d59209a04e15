// `sandfort completion bash|zsh`: a completion script (zsh runs the bash one through
// bashcompinit). Sandbox ids and names come from `sandfort sandbox ls` at completion time, volume
// names from `sandfort volume ls`, snapshot names from `sandfort snapshot ls`.
#include <iostream>

#include "commands.hpp"
#include "failure.hpp"

namespace sandfort::cli {

namespace {

const char* const bash_script = R"BASH(# sandfort bash completion: eval "$(sandfort completion bash)"
_sandfort_sandboxes() {
  command sandfort sandbox ls 2>/dev/null | awk 'NR > 1 { print $1; if ($2 != "-") print $2 }'
}
_sandfort_volumes() {
  command sandfort volume ls 2>/dev/null | awk 'NR > 1 { print $2 }'
}
_sandfort_snapshots() {
  command sandfort snapshot ls 2>/dev/null | awk 'NR > 1 { print $2 }'
}
_sandfort() {
  local cur="${COMP_WORDS[COMP_CWORD]}" cmd="${COMP_WORDS[1]}" sub="${COMP_WORDS[2]}"
  if [[ $COMP_CWORD -eq 1 ]]; then
    COMPREPLY=($(compgen -W "login logout whoami sandbox volume snapshot exec new run rm cp logs preview shell audit org key completion --help" -- "$cur"))
    return
  fi
  if [[ ${COMP_WORDS[COMP_CWORD-1]} == --runtime ]]; then
    COMPREPLY=($(compgen -W "runc gvisor" -- "$cur"))
    return
  fi
  case "$cmd" in
    sandbox)
      if [[ $COMP_CWORD -eq 2 ]]; then
        COMPREPLY=($(compgen -W "create ls get rm stop start pause resume --help" -- "$cur"))
        return
      fi
      case "$sub" in
        create) COMPREPLY=($(compgen -W "--wait --snapshot --egress --env --cpus --memory --ttl --idle-timeout --volume --runtime --json --help" -- "$cur")) ;;
        ls) COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
        get|rm|stop|start|pause|resume) COMPREPLY=($(compgen -W "$(_sandfort_sandboxes) --json --help" -- "$cur")) ;;
      esac ;;
    volume)
      if [[ $COMP_CWORD -eq 2 ]]; then
        COMPREPLY=($(compgen -W "create ls get rm --help" -- "$cur"))
        return
      fi
      case "$sub" in
        create|ls) COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
        get) COMPREPLY=($(compgen -W "$(_sandfort_volumes) --json --help" -- "$cur")) ;;
        rm) COMPREPLY=($(compgen -W "$(_sandfort_volumes) --help" -- "$cur")) ;;
      esac ;;
    snapshot)
      if [[ $COMP_CWORD -eq 2 ]]; then
        COMPREPLY=($(compgen -W "create ls get rm --help" -- "$cur"))
        return
      fi
      case "$sub" in
        create)
          if [[ $COMP_CWORD -eq 3 ]]; then COMPREPLY=($(compgen -W "$(_sandfort_sandboxes) --json --help" -- "$cur"))
          else COMPREPLY=($(compgen -W "--json --help" -- "$cur")); fi ;;
        ls) COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
        get) COMPREPLY=($(compgen -W "$(_sandfort_snapshots) --json --help" -- "$cur")) ;;
        rm) COMPREPLY=($(compgen -W "$(_sandfort_snapshots) --help" -- "$cur")) ;;
      esac ;;
    exec)
      if [[ $COMP_CWORD -eq 2 || "${COMP_WORDS[COMP_CWORD-1]}" == --* && $COMP_CWORD -eq 3 ]]; then
        COMPREPLY=($(compgen -W "$(_sandfort_sandboxes) --timeout --cwd --help" -- "$cur"))
      else
        compopt -o default 2>/dev/null; COMPREPLY=()
      fi ;;
    shell|logs|preview)
      if [[ $COMP_CWORD -eq 2 ]]; then COMPREPLY=($(compgen -W "$(_sandfort_sandboxes) --help" -- "$cur")); fi ;;
    run) COMPREPLY=($(compgen -W "--id --timeout --help" -- "$cur")) ;;
    rm) COMPREPLY=($(compgen -W "--id --help" -- "$cur")) ;;
    new) COMPREPLY=($(compgen -W "--name --snapshot --egress --env --cpus --memory --ttl --idle-timeout --volume --runtime --help" -- "$cur")) ;;
    whoami) COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
    login) COMPREPLY=($(compgen -W "--base-url --oidc --client-id --scope --resource --audience --help" -- "$cur")) ;;
    cp) compopt -o default 2>/dev/null; COMPREPLY=($(compgen -W "$(_sandfort_sandboxes)" -- "$cur")) ;;
    audit)
      if [[ $COMP_CWORD -eq 2 ]]; then
        COMPREPLY=($(compgen -W "list export public-key checkpoint checkpoints verify --help" -- "$cur"))
        return
      fi
      case "${COMP_WORDS[COMP_CWORD-1]}" in
        --public-key|--checkpoints|-o|--output) compopt -o default 2>/dev/null; COMPREPLY=(); return ;;
      esac
      local filters="--org --since-seq --since --until --actor --action --target"
      case "$sub" in
        list|ls) COMPREPLY=($(compgen -W "$filters --limit --all --json --help" -- "$cur")) ;;
        export) COMPREPLY=($(compgen -W "$filters -o --output --page-size --help" -- "$cur")) ;;
        public-key) COMPREPLY=($(compgen -W "-o --output --force --json --help" -- "$cur")) ;;
        checkpoint) COMPREPLY=($(compgen -W "--org --json --help" -- "$cur")) ;;
        checkpoints) COMPREPLY=($(compgen -W "--org -o --output --help" -- "$cur")) ;;
        verify) COMPREPLY=($(compgen -W "--public-key --checkpoints --org --page-size --json --help" -- "$cur")) ;;
      esac ;;
    org)
      if [[ $COMP_CWORD -eq 2 ]]; then
        COMPREPLY=($(compgen -W "limits set-limits stop-all lift create --help" -- "$cur"))
        return
      fi
      if [[ "${COMP_WORDS[COMP_CWORD-1]}" == --reset ]]; then
        COMPREPLY=($(compgen -W "max_sandboxes max_cpus max_memory_mb allowed_images max_volumes max_snapshots allowed_runtimes" -- "$cur"))
        return
      fi
      case "$sub" in
        limits|stop-all) COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
        set-limits) COMPREPLY=($(compgen -W "--max-sandboxes --max-cpus --max-memory-mb --max-volumes --max-snapshots --allowed-image --allowed-runtime --reset --json --help" -- "$cur")) ;;
        lift) COMPREPLY=($(compgen -W "--help" -- "$cur")) ;;
        create) COMPREPLY=($(compgen -W "--key-name --json --help" -- "$cur")) ;;
      esac ;;
    key)
      if [[ $COMP_CWORD -eq 2 ]]; then
        COMPREPLY=($(compgen -W "create ls revoke --help" -- "$cur"))
        return
      fi
      if [[ "${COMP_WORDS[COMP_CWORD-1]}" == --role ]]; then
        COMPREPLY=($(compgen -W "viewer member admin" -- "$cur"))
        return
      fi
      case "$sub" in
        create) COMPREPLY=($(compgen -W "--name --role --expires-in --org --json --help" -- "$cur")) ;;
        ls|list) COMPREPLY=($(compgen -W "--json --help" -- "$cur")) ;;
        revoke|rm) COMPREPLY=($(compgen -W "$(command sandfort key ls 2>/dev/null | awk 'NR > 1 && $NF == "-" { print $1 }') --help" -- "$cur")) ;;
      esac ;;
    completion) COMPREPLY=($(compgen -W "bash zsh" -- "$cur")) ;;
  esac
}
complete -F _sandfort sandfort
)BASH";

}  // namespace

int cmd_completion(const std::string& shell) {
  if (shell == "bash") {
    std::cout << bash_script;
  } else if (shell == "zsh") {
    std::cout << "# sandfort zsh completion: eval \"$(sandfort completion zsh)\"\n"
                 "autoload -U +X compinit && compinit\n"
                 "autoload -U +X bashcompinit && bashcompinit\n"
              << bash_script;
  } else {
    throw failure("completion is available for bash and zsh, not \"" + shell + "\"", 2);
  }
  return 0;
}

}  // namespace sandfort::cli
