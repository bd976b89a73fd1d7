#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A guest that boots Debian's systemd as PID 1, with the engramctl and
# libengram0 packages installed (selftests/deb-check.sh builds them) and
# the module of the tree, and runs selftests/guest/systemd_boot.sh as a
# unit of that boot (init's engram_systemd=1, selftests/vm/systemd-root.sh).
#
#   run-systemd.sh --kver 6.12 [--timeout SECONDS] [--logs DIR]
#
# Prints the guest's TAP, then ENGRAM-SELFTESTS-COMPLETE once the guest
# reported its exit status; exits with that status (125: none came).
set -u

here=$(cd "$(dirname "$0")" && pwd)
KVER=6.12 TMO=600 LOGS=()
while [ $# -gt 0 ]; do
	case "$1" in
	--kver) KVER=${2:?}; shift 2 ;;
	--timeout) TMO=${2:?}; shift 2 ;;
	--logs) LOGS=(--logs "${2:?}"); shift 2 ;;
	*) echo "run-systemd.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done
cd "$here/../.." || exit 2
"$here/run.sh" --kver "$KVER" --timeout "$TMO" "${LOGS[@]}" \
	--append "engram_systemd=1 systemd.unit=multi-user.target systemd.show_status=error" \
	-- selftests/guest/systemd_boot.sh
rc=$?
[ $rc -eq 125 ] || echo ENGRAM-SELFTESTS-COMPLETE
exit $rc
