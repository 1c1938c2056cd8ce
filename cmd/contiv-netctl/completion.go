package main

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// The completion command: a bash or zsh script that completes the
// commands, their flags, the -o and -color values, files for the file
// flags, and node names (from "contiv-netctl nodes -o name", run with the
// global flags already typed) for -node and "ipam NODE".

func completionUsage(w io.Writer) {
	_, _ = fmt.Fprint(w, `Usage: contiv-netctl completion bash|zsh

Print a shell completion script for contiv-netctl on stdout. It completes the commands, the
flags, the values of -o and -color, files for the file flags, and node names for -node and
"ipam NODE" (by running "contiv-netctl [the global flags typed] nodes -o name").

  bash:  source <(contiv-netctl completion bash)          (or save it in
         /etc/bash_completion.d/contiv-netctl)
  zsh:   source <(contiv-netctl completion zsh)           (after compinit; or save it as
         _contiv-netctl in a directory of $fpath)
`)
}

// completionCommand runs "completion bash|zsh".
func completionCommand(args []string, cio *cmdIO) error {
	switch {
	case len(args) == 1 && isHelp(args[0]):
		return &helpRequest{usage: completionUsage}
	case len(args) != 1:
		return &usageError{msg: fmt.Sprintf("completion: %d arguments %q: want bash or zsh", len(args), args), usage: completionUsage}
	}
	var script string
	switch args[0] {
	case "bash":
		script = bashCompletion
	case "zsh":
		script = zshCompletion
	default:
		return &usageError{msg: fmt.Sprintf("completion: shell %q: want bash or zsh", args[0]), usage: completionUsage}
	}
	r := strings.NewReplacer("@GLOBAL_VALUE_FLAGS@", strings.Join(globalValueFlags, "|"),
		"@VALUE_FLAGS@", strings.Join(commandValueFlags, "|"),
		"@GLOBAL_FLAGS@", strings.Join(prefixed(globalFlagNames()), " "),
		"@COMMANDS@", strings.Join(append(commandNames[:len(commandNames):len(commandNames)], "help"), " "),
		"@IPAM_COMMANDS@", strings.Join(ipamCommands, " "))
	if _, err := io.WriteString(cio.stdout, r.Replace(script)); err != nil {
		return fmt.Errorf("completion: writing to stdout: %w", err)
	}
	return nil
}

// globalValueFlags are the global flags that take a value (the script
// skips their values and passes them to "nodes -o name"), as shell
// patterns.
var globalValueFlags = []string{"-server", "--server", "-user", "--user", "-cacert", "--cacert", "-cert", "--cert",
	"-key", "--key", "-timeout", "--timeout", "-etcd", "--etcd", "-etcd-cacert", "--etcd-cacert", "-etcd-cert",
	"--etcd-cert", "-etcd-key", "--etcd-key", "-color", "--color"}

// commandValueFlags are the commands' flags that take a value.
var commandValueFlags = []string{"-o", "--o", "-node", "--node", "-namespace", "--namespace", "-from-report", "--from-report", "-from", "--from"}

// globalFlagNames are the names of the global flags.
func globalFlagNames() []string {
	var names []string
	globalFlags(&globals{}).VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	return names
}

// prefixed is every name with "-".
func prefixed(names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "-" + n
	}
	return out
}

// bashCompletion is the bash script. The words are COMP_LINE up to the
// cursor split on blanks (so that "=" and ":" in URLs and flag values
// stay in their word), or COMP_WORDS when COMP_LINE is unset.
const bashCompletion = `# bash completion for contiv-netctl: source <(contiv-netctl completion bash)
_contiv_netctl_nodes() {
    "$1" "${@:2}" nodes -o name 2>/dev/null
}

_contiv_netctl() {
    local -a words
    if [[ -n "${COMP_LINE+set}" ]]; then
        local line="${COMP_LINE:0:${COMP_POINT:-${#COMP_LINE}}}"
        read -r -a words <<< "$line"
        if [[ -z "$line" || "$line" == *[[:space:]] ]]; then
            words+=("")
        fi
    else
        words=("${COMP_WORDS[@]:0:COMP_CWORD+1}")
    fi
    local n=${#words[@]}
    local cur="${words[n-1]}" prev=""
    (( n > 1 )) && prev="${words[n-2]}"
    local -a cmds=() globals=()
    local i w skip=0
    for (( i = 1; i < n - 1; i++ )); do
        w="${words[i]}"
        if (( skip )); then
            skip=0
            (( ${#cmds[@]} == 0 )) && globals+=("$w")
            continue
        fi
        case "$w" in
            @GLOBAL_VALUE_FLAGS@)
                if (( ${#cmds[@]} == 0 )); then globals+=("$w"); fi
                skip=1 ;;
            @VALUE_FLAGS@) skip=1 ;;
            --) ;;
            -*=*) (( ${#cmds[@]} == 0 )) && globals+=("$w") ;;
            -*) ;;
            *) cmds+=("$w") ;;
        esac
    done
    local cmd="${cmds[*]}"

    # The value of a flag: "-flag value" or "-flag=value".
    local flag="" val="$cur" pre=""
    if [[ "$cur" == -*=* ]]; then
        flag="${cur%%=*}" val="${cur#*=}"
        # bash splits the word at "=" (COMP_WORDBREAKS): reply the value alone then.
        if [[ -n "${COMP_WORDS+set}" && "${COMP_WORDS[COMP_CWORD]}" == *=* ]]; then pre="$flag="; fi
    elif [[ "$prev" == -* && "$prev" != *=* ]]; then
        case "$prev" in @GLOBAL_VALUE_FLAGS@|@VALUE_FLAGS@) flag="$prev" ;; esac
    fi
    if [[ -n "$flag" ]]; then
        local list=""
        case "${flag#-}" in
            -color|color) list="auto always never" ;;
            -from|from) list="contiv aws-vpc-cni" ;;
            -o|o)
                case "$cmd" in
                    nodes|pods) list="table wide json yaml name" ;;
                    "ipam check") list="table json" ;;
                    "ipam checkpoint export") COMPREPLY=($(compgen -f -- "$val")); return 0 ;;
                    *) list="table wide json yaml" ;;
                esac ;;
            -node|node) list="$(_contiv_netctl_nodes "${words[0]}" "${globals[@]}")" ;;
            -cacert|cacert|-cert|cert|-key|key|-etcd-cacert|etcd-cacert|-etcd-cert|etcd-cert|-etcd-key|etcd-key|-from-report|from-report)
                COMPREPLY=($(compgen -f -- "$val")); return 0 ;;
            *) COMPREPLY=(); return 0 ;;
        esac
        COMPREPLY=($(compgen -P "$pre" -W "$list" -- "$val"))
        return 0
    fi

    local list=""
    case "$cmd" in
        "")
            if [[ "$cur" == -* ]]; then list="@GLOBAL_FLAGS@ -h"; else list="@COMMANDS@"; fi ;;
        nodes) list="-o" ;;
        pods) list="-node -namespace -o" ;;
        ipam)
            if [[ "$cur" == -* ]]; then list="-o -h"
            else list="@IPAM_COMMANDS@ $(_contiv_netctl_nodes "${words[0]}" "${globals[@]}")"; fi ;;
        "ipam check") list="-o" ;;
        "ipam release") list="-from-report" ;;
        "ipam checkpoint") list="export import" ;;
        "ipam checkpoint export") list="-o" ;;
        "ipam checkpoint import")
            if [[ "$cur" == -* ]]; then list="-from -replace"; else COMPREPLY=($(compgen -f -- "$cur")); return 0; fi ;;
        "ipam conflicts") list="list restore discard" ;;
        completion) list="bash zsh" ;;
        ipam\ *)
            # ipam NODE
            (( ${#cmds[@]} == 2 )) && list="-o" ;;
    esac
    COMPREPLY=($(compgen -W "$list" -- "$cur"))
    return 0
}

complete -o default -F _contiv_netctl contiv-netctl
`

// zshCompletion is the zsh script (the same rules as bash's, on zsh's
// words and CURRENT).
const zshCompletion = `#compdef contiv-netctl
# zsh completion for contiv-netctl: source <(contiv-netctl completion zsh) after compinit,
# or save as _contiv-netctl in a directory of $fpath.

_contiv_netctl_nodes() {
    "$1" "${@[2,-1]}" nodes -o name 2>/dev/null
}

_contiv_netctl() {
    local cur="${words[CURRENT]}" prev="${words[CURRENT-1]}"
    local -a cmds globals
    local i w skip=0
    for (( i = 2; i < CURRENT; i++ )); do
        w="${words[i]}"
        if (( skip )); then
            skip=0
            (( ${#cmds} == 0 )) && globals+=("$w")
            continue
        fi
        case "$w" in
            (@GLOBAL_VALUE_FLAGS@)
                (( ${#cmds} == 0 )) && globals+=("$w")
                skip=1 ;;
            (@VALUE_FLAGS@) skip=1 ;;
            (--) ;;
            (-*=*) (( ${#cmds} == 0 )) && globals+=("$w") ;;
            (-*) ;;
            (*) cmds+=("$w") ;;
        esac
    done
    local cmd="${(j: :)cmds}"

    local flag="" val="$cur"
    if [[ "$cur" == -*=* ]]; then
        flag="${cur%%=*}" val="${cur#*=}"
        compset -P '*='
    elif [[ "$prev" == -* && "$prev" != *=* ]]; then
        case "$prev" in (@GLOBAL_VALUE_FLAGS@|@VALUE_FLAGS@) flag="$prev" ;; esac
    fi
    local -a list
    if [[ -n "$flag" ]]; then
        case "${flag#-}" in
            (-color|color) list=(auto always never) ;;
            (-from|from) list=(contiv aws-vpc-cni) ;;
            (-o|o)
                case "$cmd" in
                    (nodes|pods) list=(table wide json yaml name) ;;
                    ("ipam check") list=(table json) ;;
                    ("ipam checkpoint export") _files; return ;;
                    (*) list=(table wide json yaml) ;;
                esac ;;
            (-node|node) list=(${(f)"$(_contiv_netctl_nodes "${words[1]}" "${globals[@]}")"}) ;;
            (-cacert|cacert|-cert|cert|-key|key|-etcd-cacert|etcd-cacert|-etcd-cert|etcd-cert|-etcd-key|etcd-key|-from-report|from-report)
                _files; return ;;
            (*) return 1 ;;
        esac
        compadd -- "${list[@]}"
        return
    fi

    case "$cmd" in
        ("")
            if [[ "$cur" == -* ]]; then list=(@GLOBAL_FLAGS@ -h); else list=(@COMMANDS@); fi ;;
        (nodes) list=(-o) ;;
        (pods) list=(-node -namespace -o) ;;
        (ipam)
            if [[ "$cur" == -* ]]; then list=(-o -h)
            else list=(@IPAM_COMMANDS@ ${(f)"$(_contiv_netctl_nodes "${words[1]}" "${globals[@]}")"}); fi ;;
        ("ipam check") list=(-o) ;;
        ("ipam release") list=(-from-report) ;;
        ("ipam checkpoint") list=(export import) ;;
        ("ipam checkpoint export") list=(-o) ;;
        ("ipam checkpoint import")
            if [[ "$cur" == -* ]]; then list=(-from -replace); else _files; return; fi ;;
        ("ipam conflicts") list=(list restore discard) ;;
        (completion) list=(bash zsh) ;;
        ("ipam "*) (( ${#cmds} == 2 )) && list=(-o) ;;
    esac
    compadd -- "${list[@]}"
}

if [[ "${funcstack[1]}" == "_contiv_netctl" || "${funcstack[1]}" == "_contiv-netctl" ]]; then
    _contiv_netctl "$@"
else
    compdef _contiv_netctl contiv-netctl
fi
`
