# SPDX-License-Identifier: GPL-2.0
# A guest of a multi-guest run stops soon after the guest it talks to has
# died, instead of waiting out its whole timeout for it (run.sh --peer).

# peer_alive PID: PID runs; a zombie (ended, not yet waited for) does not.
peer_alive() {
	local st

	st=$(ps -o stat= -p "$1" 2>/dev/null) || return 1
	[ -n "$st" ] && [ "${st#Z}" = "$st" ]
}

# peer_watch PID GRACE CMD...: poll PID every second; once it has been
# gone GRACE seconds running, run CMD and return.  A peer that ends
# normally has told its partner it is done long before GRACE runs out.
peer_watch() {
	local pid=$1 grace=$2 gone=0

	shift 2
	while sleep 1; do
		if peer_alive "$pid"; then
			gone=0
			continue
		fi
		gone=$((gone + 1))
		if [ $gone -ge "$grace" ]; then
			"$@"
			return
		fi
	done
}
