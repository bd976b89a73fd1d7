# SPDX-License-Identifier: GPL-2.0
# Shared by the two-guest runners (run-pair.sh, run-faults.sh): the first
# guest's QEMU listens on a free port of 127.0.0.1 (the only address used on
# the machine) and the other connects to it.

# free_port: print a free TCP port on 127.0.0.1, chosen at random so that
# parallel runs differ; fail when 50 tries found none.
free_port() {
	local p
	for _ in $(seq 1 50); do
		p=$((20000 + RANDOM % 20000))
		if ! ss -Hltn "sport = :$p" 2>/dev/null | grep -q .; then
			echo "$p"
			return 0
		fi
	done
	return 1
}

# wait_listening PORT PID: until QEMU (PID, still running) listens on PORT,
# at most 30 s; the other guest must not connect before.
wait_listening() {
	for _ in $(seq 1 300); do
		ss -Hltn "sport = :$1" 2>/dev/null | grep -q . && return 0
		kill -0 "$2" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# logs_opt NAME: run.sh's --logs option for guest NAME under $LOGS, one
# word per line (for mapfile), or nothing without --logs.
logs_opt() { [ -z "$LOGS" ] || printf -- '--logs\n%s\n' "$LOGS/$1"; }
