# SPDX-License-Identifier: GPL-2.0
#
# The reports in a kernel log that fail a run: prints each such line.
#   awk [-v alloc_ok=1] -f selftests/splats.awk LOG...
#
# Used by the guest runner on each test's part of the log and by
# selftests/check.sh on each guest's whole log, so both judge alike.
#
# A failed page allocation that the caller did not mark __GFP_NOWARN is
# reported by the allocator (warn_alloc: "page allocation failure" or
# "vmalloc error", then a stack dump).  In a test guest that is a finding,
# unless the test injected the failure (fail_page_alloc in t_68): with
# alloc_ok=1 such a report and the stack dump that belongs to it are
# expected, while everything else still counts.
BEGIN {
	splat = "(BUG:|WARNING:|Oops|general protection fault|KASAN:|UBSAN:|" \
		"kmemleak: [0-9]+ new suspected|refcount_t:|list_(add|del) corruption|" \
		"INFO: task .* blocked|detected stall|Kernel panic|" \
		"stack-protector|unreferenced object|Call Trace:)"
	alloc = "(page allocation failure: order:|vmalloc error: size)"
	in_alloc = 0
}
$0 ~ alloc {
	if (alloc_ok) {
		in_alloc = 1
		next
	}
	print
	next
}
# A process's own fault ("traps: ib_send_lat[337] general protection fault
# ip:... in librdmacm.so..."): the kernel reporting a signal it sent, not a
# fault of its own.  The test whose tool crashed fails by its exit status.
/traps: [^ ]+\[[0-9]+\] general protection fault ip:/ {
	next
}
/Call Trace:/ && in_alloc {
	in_alloc = 0
	next
}
$0 ~ splat {
	print
}
