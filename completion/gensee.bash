# bash completion for gensee(1). Self-contained: it works with or without the
# bash-completion package. Commands and flags follow cli/*.c (the long
# options of each command); tests/integration/test_install.py checks that
# every long option of run, watch, status and timeline is offered.

_gensee_opts_run='--timeout --kill-grace --json --quiet --sandbox --allow-net --deny-net --deny-all --monitor
  --lease-scope --max-lease-ttl --network-config --linux-seccomp --no-linux-seccomp
  --linux-landlock-ro --linux-landlock-rw --allow-unix --linux-fanotify --linux-network --agent --help
  --runtime --observe-only --podman --image --name --detach'
# The tclone lifecycle (cli/tclone.c): gensee run SUBCOMMAND ...
_gensee_tclone_subs='list fork diff summary compare merge choose switch keep discard delete attach send exec shell approve'

_gensee()
{
	local cur prev words cword
	cur=${COMP_WORDS[COMP_CWORD]}
	prev=${COMP_WORDS[COMP_CWORD-1]}
	words=("${COMP_WORDS[@]}")
	cword=$COMP_CWORD
	COMPREPLY=()

	# Everything after "run ... --" is the supervised command's.
	local i cmd= sub= dashdash=0
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		--) [[ $cmd == run ]] && { dashdash=$i; break; } ;;
		-*) ;;
		*)
			if [[ -z $cmd ]]; then
				cmd=${words[i]}
				[[ $cmd == linux ]] && cmd=
			elif [[ -z $sub ]]; then
				case ${words[i-1]} in
				--timeout | --sandbox | --allow-net | --deny-net | --lease-scope | \
				--max-lease-ttl | --network-config | --linux-landlock-ro | \
				--linux-landlock-rw | --allow-unix | --pid | --duration-seconds | \
				--operation | --session-id | --allow | --deny | --seconds | --events | \
				--socket | --event | --lease | --fault | --older-than | --keep | \
				--runtime | --name | --copies | --approach | --into | --to | --attach | --tmux | \
				--agent) ;;
				*) sub=${words[i]} ;;
				esac
			fi
			;;
		esac
	done
	if ((dashdash > 0)); then
		# Complete the command like the shell would.
		if ((cword == dashdash + 1)); then
			COMPREPLY=($(compgen -c -- "$cur"))
		else
			COMPREPLY=($(compgen -f -- "$cur"))
		fi
		return 0
	fi

	case $prev in
	--sandbox)
		COMPREPLY=($(compgen -W 'linux' -- "$cur"))
		return 0
		;;
	--runtime)
		COMPREPLY=($(compgen -W 'tclone' -- "$cur"))
		return 0
		;;
	--agent)
		COMPREPLY=($(compgen -W 'codex claude gemini none' -- "$cur"))
		return 0
		;;
	--attach | --tmux)
		COMPREPLY=($(compgen -W 'tmux:right right' -- "$cur"))
		return 0
		;;
	--to)
		COMPREPLY=($(compgen -d -- "$cur"))
		return 0
		;;
	--into | --name | --copies | --approach)
		return 0
		;;
	--network-config | --linux-landlock-ro | --linux-landlock-rw | --allow-unix | --fault | \
	--event | --socket | --config | --request | --body-file)
		COMPREPLY=($(compgen -f -- "$cur"))
		return 0
		;;
	--pid)
		COMPREPLY=($(compgen -W "$(command ls /proc 2>/dev/null | grep '^[0-9]')" -- "$cur"))
		return 0
		;;
	--timeout | --kill-grace | --grace | --allow-net | --deny-net | --lease-scope | --max-lease-ttl | \
	--duration-seconds | --operation | --session-id | --allow | --deny | --seconds | \
	--events | --lease | --older-than | --keep | --transaction | --effect | --ttl-seconds | \
	--method | --url | --body-sha256)
		return 0
		;;
	esac

	local words_list=
	case $cmd in
	'')
		words_list='run status watch operation timeline policy agent debug --help --version'
		;;
	run)
		case $sub in
		network)
			words_list='inspect event revoke grant-http revoke-http commit-token transaction-begin
				transaction-activate transaction-end transaction-revoke transaction-execute
				--socket --operation --event --lease --transaction --effect --ttl-seconds
				--config --request --method --url --body-file --body-sha256 --json --help'
			;;
		fault) words_list='--socket --operation --fault --json --help' ;;
		list | diff | summary | compare | switch | keep | discard | send | exec | shell)
			words_list='--json --to --help' ;;
		attach) words_list='--tmux --help' ;;
		fork) words_list='--copies --name --approach --attach --json --help' ;;
		merge) words_list='--into --git --filesystem --paths --dry-run --force --json --help' ;;
		choose) words_list='--merge --promote --discard-all --json --help' ;;
		approve) words_list='--merge --promote --discard --help' ;;
		delete) words_list='--all --json --help' ;;
		'') words_list="$_gensee_opts_run -- network fault $_gensee_tclone_subs" ;;
		*) words_list="$_gensee_opts_run --" ;;
		esac
		;;
	status) words_list='--json --help' ;;
	agent)
		case $sub in
		'') words_list='state --help' ;;
		*) words_list='codex claude gemini --json --reset --help' ;;
		esac
		;;
	watch) words_list='--pid --duration-seconds --json --linux-fanotify --help' ;;
	operation)
		case $sub in
		'') words_list='inspect list end prune --help' ;;
		end) words_list='--kill --grace --json --help' ;;
		prune) words_list='--older-than --keep --dry-run --json --help' ;;
		*) words_list='--json --help' ;;
		esac
		;;
	timeline) words_list='--operation --follow --json --ocsf --help' ;;
	policy)
		case $sub in
		'') words_list='setup show get set help --json --force --help' ;;
		get | set)
			# The keys, from the CLI itself (gensee policy help lists them).
			words_list="$(gensee policy help 2>/dev/null |
				awk '$1 ~ /^linux\./ {print $1}') --json"
			;;
		setup) words_list='--force --json --help' ;;
		*) words_list='--json --help' ;;
		esac
		;;
	debug)
		case $sub in
		'') words_list='plan fanotify-plan fanotify-once network-plan network-apply seccomp-profile --help' ;;
		network-plan | network-apply)
			words_list='--session-id --pid --allow --deny --deny-all --monitor --json --help'
			;;
		fanotify-once) words_list='--seconds --events --json --help' ;;
		*) words_list='--json --help' ;;
		esac
		;;
	esac
	COMPREPLY=($(compgen -W "$words_list" -- "$cur"))
	return 0
}
complete -F _gensee gensee
