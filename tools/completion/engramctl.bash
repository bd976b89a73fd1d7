# SPDX-License-Identifier: GPL-2.0
# bash completion for engramctl(8): objects, commands, options, and the
# names the module knows (tables, link ids, listeners, allow-list entries),
# asked of engramctl itself; nothing is offered for those when the module is
# not loaded.

_engramctl_names()
{
	# $1: list (tables), link (ids), listen (URLs), allow (entries)
	local out
	case $1 in
	list) out=$(engramctl list 2>/dev/null) && awk -F: '{print $1}' <<<"$out" ;;
	link) out=$(engramctl link list 2>/dev/null) &&
		sed -n 's/^link \([0-9][0-9]*\):.*/\1/p' <<<"$out" ;;
	listen) out=$(engramctl listen show 2>/dev/null) &&
		grep -oE '^(rdma|tcp)://[^ :]+(:[0-9]+)?|^(rdma|tcp)://\[[^]]+\](:[0-9]+)?' <<<"$out" ;;
	allow) out=$(engramctl listen allow show 2>/dev/null) &&
		grep -oE '^[0-9a-fA-F:.]+(/[0-9]+)?' <<<"$out" ;;
	esac
}

_engramctl()
{
	local cur prev words cword
	_init_completion 2>/dev/null || {
		cur=${COMP_WORDS[COMP_CWORD]}
		prev=${COMP_WORDS[COMP_CWORD - 1]}
		words=("${COMP_WORDS[@]}")
		cword=$COMP_CWORD
	}
	local common="-j --json -p --pretty -h --help"
	local i obj="" cmd="" sub="" nargs=0

	# The object, its command and what follows, skipping global options.
	for ((i = 1; i < cword; i++)); do
		case ${words[i]} in
		-*) continue ;;
		esac
		if [ -z "$obj" ]; then
			obj=${words[i]}
		elif [ -z "$cmd" ]; then
			cmd=${words[i]}
		elif [ "$obj $cmd" = "listen allow" ] && [ -z "$sub" ]; then
			sub=${words[i]}
		else
			nargs=$((nargs + 1))
		fi
	done
	# "engramctl load ..." is "engramctl table load ...".
	case $obj in
	load | unload | list | show | verify)
		[ -z "$cmd" ] || nargs=$((nargs + 1))
		cmd=$obj
		obj=table
		;;
	esac

	case $prev in
	--config | -c)
		_filedir conf 2>/dev/null || COMPREPLY=($(compgen -f -- "$cur"))
		return
		;;
	--output | -o)
		_filedir prom 2>/dev/null || COMPREPLY=($(compgen -f -- "$cur"))
		return
		;;
	--tensor | -t | --name | -n | --sha256 | -s | --rows | --seed | --prefix | \
	--pad-before | --pad-after | --meta | --count | --quiet)
		return
		;;
	esac

	if [ -z "$obj" ]; then
		COMPREPLY=($(compgen -W "table stats link listen mktable monitor load unload list show
			verify help -j --json -p --pretty -h --help -V --version" -- "$cur"))
		return
	fi
	case $obj in
	table)
		if [ -z "$cmd" ]; then
			COMPREPLY=($(compgen -W "list show load unload verify sync drain undrain mktable
				help" -- "$cur"))
			return
		fi
		case $cmd in
		load)
			if [[ $cur == -* ]]; then
				COMPREPLY=($(compgen -W "--tensor --name --sha256 --no-progress $common" -- "$cur"))
			elif [ $nargs -eq 0 ]; then
				_filedir safetensors 2>/dev/null || COMPREPLY=($(compgen -f -- "$cur"))
			fi
			;;
		unload)
			if [[ $cur == -* ]]; then
				COMPREPLY=($(compgen -W "--config $common" -- "$cur"))
			elif [ $nargs -eq 0 ]; then
				COMPREPLY=($(compgen -W "$(_engramctl_names list)" -- "$cur"))
			fi
			;;
		show | verify)
			if [[ $cur == -* ]]; then
				COMPREPLY=($(compgen -W "--no-progress $common" -- "$cur"))
			elif [ $nargs -eq 0 ]; then
				COMPREPLY=($(compgen -W "$(_engramctl_names list)" -- "$cur"))
			fi
			;;
		sync)
			COMPREPLY=($(compgen -W "--config --prune --dry-run --no-progress $common" -- "$cur"))
			;;
		drain | undrain)
			if [[ $cur == -* ]]; then
				# --wait takes its SECONDS only as --wait=SECONDS.
				if [ "$cmd" = drain ]; then
					COMPREPLY=($(compgen -W "--all --wait --quiet --no-progress
						$common" -- "$cur"))
				else
					COMPREPLY=($(compgen -W "--all $common" -- "$cur"))
				fi
			elif [ $nargs -eq 0 ]; then
				COMPREPLY=($(compgen -W "$(_engramctl_names list)" -- "$cur"))
			fi
			;;
		*)
			COMPREPLY=($(compgen -W "$common" -- "$cur"))
			;;
		esac
		;;
	stats)
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "--prometheus --output $common" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "show $(_engramctl_names list)" -- "$cur"))
		fi
		;;
	link)
		if [ -z "$cmd" ]; then
			COMPREPLY=($(compgen -W "add del list show tables help" -- "$cur"))
		elif [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "$common" -- "$cur"))
		elif [ "$cmd" = add ] && [ $nargs -eq 0 ]; then
			compopt -o nospace 2>/dev/null
			COMPREPLY=($(compgen -W "rdma:// tcp://" -- "$cur"))
		elif [[ $cmd == del || $cmd == show || $cmd == tables ]] && [ $nargs -eq 0 ]; then
			COMPREPLY=($(compgen -W "$(_engramctl_names link)" -- "$cur"))
		fi
		;;
	listen)
		if [ -z "$cmd" ]; then
			COMPREPLY=($(compgen -W "add del show allow help" -- "$cur"))
		elif [ "$cmd" = allow ]; then
			if [ -z "$sub" ]; then
				COMPREPLY=($(compgen -W "add del show help" -- "$cur"))
			elif [ "$sub" = del ] && [ $nargs -eq 0 ]; then
				COMPREPLY=($(compgen -W "$(_engramctl_names allow)" -- "$cur"))
			fi
		elif [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "$common" -- "$cur"))
		elif [ "$cmd" = add ] && [ $nargs -eq 0 ]; then
			compopt -o nospace 2>/dev/null
			COMPREPLY=($(compgen -W "rdma:// tcp://" -- "$cur"))
		elif [ "$cmd" = del ] && [ $nargs -eq 0 ]; then
			COMPREPLY=($(compgen -W "$(_engramctl_names listen)" -- "$cur"))
		fi
		;;
	monitor)
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "--count $common" -- "$cur"))
		else
			COMPREPLY=($(compgen -W "all table link listen" -- "$cur"))
		fi
		;;
	mktable)
		if [[ $cur == -* ]]; then
			COMPREPLY=($(compgen -W "--rows --seed --prefix --pad-before --pad-after --meta
				$common" -- "$cur"))
		elif [ -z "$cmd" ]; then
			_filedir safetensors 2>/dev/null || COMPREPLY=($(compgen -f -- "$cur"))
		fi
		;;
	esac
}
complete -F _engramctl engramctl
