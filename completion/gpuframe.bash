# SPDX-License-Identifier: MIT
# shellcheck shell=bash
# bash completion of gpuframe, the client of gpuframed.  Installed as
# share/bash-completion/completions/gpuframe, which bash-completion loads the
# first time `gpuframe` is completed; or source it from ~/.bashrc.
#
# It completes the commands; each command's options as the command's own
# --help lists them (so it never falls behind the program); pipeline names
# for --pipeline, from the daemon the command line names (--socket, else
# $GPUFRAMED_SOCKET or /run/gpuframed.sock, as gpuframe itself chooses);
# file names, and '-' where a file is read or written.

# The long options that `gpuframe COMMAND --help` (on stdin) lists.
_gpuframe_long_options() {
    sed -n 's/^ \{2,\}\(-[a-zA-Z], \)\{0,1\}\(--[a-z][a-z-]*\).*/\2/p'
}

# The pipeline names of the daemon that words[1..cword-1] point at.
_gpuframe_pipelines() {
    local i socket=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        case ${COMP_WORDS[i]} in
        -s | --socket) socket=(--socket "${COMP_WORDS[i + 1]}") ;;
        --socket=*) socket=(--socket "${COMP_WORDS[i]#--socket=}") ;;
        esac
    done
    # The table's second column, below its header; names have no blanks.
    "${COMP_WORDS[0]}" list "${socket[@]}" --timeout 2000 2>/dev/null | awk 'NR > 1 { print $2 }'
}

_gpuframe() {
    local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD - 1]} cmd='' i
    COMPREPLY=()
    for ((i = 1; i < COMP_CWORD; i++)); do
        if [[ ${COMP_WORDS[i]} != -* ]]; then
            cmd=${COMP_WORDS[i]}
            break
        fi
    done
    if [[ -z $cmd ]]; then
        mapfile -t COMPREPLY < <(compgen -W "list stats stream trace --help --version" -- "$cur")
        return 0
    fi
    case $prev in
    -p | --pipeline)
        mapfile -t COMPREPLY < <(compgen -W "$(_gpuframe_pipelines)" -- "$cur")
        return 0
        ;;
    -i | --input | -o | --output | --svg)
        mapfile -t COMPREPLY < <(compgen -f -- "$cur"; [[ - == "$cur"* ]] && echo -)
        compopt -o filenames 2>/dev/null
        return 0
        ;;
    -s | --socket)
        mapfile -t COMPREPLY < <(compgen -f -- "$cur")
        compopt -o filenames 2>/dev/null
        return 0
        ;;
    --size | -n | --count | -w | --window | --seed | -t | --timeout | --watch | --deadline-ms | --rate | --start-at)
        return 0 # a number: nothing to offer
        ;;
    esac
    if [[ $cur == -* ]]; then
        mapfile -t COMPREPLY < <(compgen -W "$("${COMP_WORDS[0]}" "$cmd" --help 2>/dev/null |
            _gpuframe_long_options)" -- "$cur")
    fi
    return 0
}

complete -F _gpuframe gpuframe
