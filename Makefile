# SPDX-License-Identifier: GPL-2.0
#
# engram-rdma: top-level build.  `make` builds the module for KDIR and the
# tools; everything else (deps, check, style, vm-run, demo) is a thin
# wrapper over scripts in selftests/ and tools/ so each step can also be run
# by hand.

PREFIX	?= /usr/local
DESTDIR	?=
KVER	?= 6.1
CACHE	?= /var/cache/engram-rdma
export CACHE

# The running kernel's build tree when it exists, otherwise the test kernel's.
KDIR	?= $(shell selftests/vm/kernels.sh kdir $(KVER))
# The release modules of KDIR install under.  Debian's 6.1 headers answer
# `make kernelrelease` with the upstream version, so read what the kernel
# itself reports as uname -r.
KREL	= $(shell sed -n 's/^\#define UTS_RELEASE "\(.*\)"/\1/p' \
		$(KDIR)/include/generated/utsrelease.h 2>/dev/null)

.PHONY: all module tools deps check bench unit style vm-run demo install krel \
	install-module install-tools uninstall uninstall-module uninstall-tools dkms-check deb clean debug-kernel check-debug check-quick fuzz \
	soak soak-exact matrix check-kernels check-packages check-replicas bench-replicas

all: module tools

module:
	@test -n "$(KDIR)" -a -d "$(KDIR)" || \
		{ echo "no kernel build tree (KDIR='$(KDIR)'): run 'make deps' or set KDIR" >&2; exit 1; }
	$(MAKE) -C $(KDIR) M=$(CURDIR) W=1 modules

tools:
	$(MAKE) -C tools
	$(MAKE) -C selftests/bench

deps:
	selftests/vm/deps.sh

# The guests' debug kernel (KASAN, lockdep, kmemleak, UBSAN, fault injection,
# KCOV, gcov), built once into $(CACHE); `make vm-run KVER=debug` boots it.
debug-kernel: deps
	selftests/vm/debug-kernel.sh

check:
	selftests/check.sh

# For iterating: everything before the guests (builds, style, unit tests,
# DKMS, install), then one 6.12 guest with the harness, digest, fetch and
# TCP tests; no fault, replicas or exactness run, no debug kernel.  About
# eight minutes.
check-quick:
	KVERS=6.12 FAULT_KVERS= REPLICAS_KVERS= EXACT_KVERS= ARM64_PAIR= CHECK_DEBUG=0 \
		MATRIX="$${MATRIX:-x86-5.10-oldest arm64-6.12-16k}" \
		GUEST_FILTER="$${GUEST_FILTER:-t_00 t_30 t_57 t_58}" selftests/check.sh

# The single-guest suite on the other kernels the guests boot: the oldest
# 5.10 of bullseye's main archive (5.10.0-30) and sid's 7.2, unpacked into
# $(CACHE) by kheaders.sh, side by side as make check runs 6.1 and 6.12;
# every test on both (make check spreads them over 6.1, 6.12 and the debug
# kernel) but those that need the debug kernel's fault injection or KCOV
# ("# needs: the debug kernel"); with the steps before the guests (builds,
# matrix of these kernels, unit tests, DKMS, install).
check-kernels:
	KVERS="5.10 7.2" FAULT_KVERS= ARM64_PAIR= CHECK_DEBUG=0 MATRIX="$${MATRIX:-x86-5.10-oldest x86-5.10 x86-7.2}" \
		GUEST_FILTER="$${GUEST_FILTER:-$$(grep -L -e '^# needs: the debug kernel' -e '^# kernels: none$$' selftests/guest/t_*.sh | \
			xargs -n1 basename | sed 's/\.sh$$//' | tr '\n' ' ')}" \
		selftests/check.sh

# The suite, the two-guest run and the fault run on the debug kernel only,
# with line coverage (Documentation/testing.rst): about three hours, four
# to five times the same on a stock kernel.
check-debug: debug-kernel
	KVERS=debug PAIR_KVERS=debug FAULT_KVERS=debug ARM64_PAIR= VM_TIMEOUT=$${VM_TIMEOUT:-9000} \
		selftests/check.sh

# Coverage-guided fuzzing (KCOV) of the module's netlink, ioctl and TCP
# surfaces on the debug kernel: FUZZ_INPUTS (1000000), FUZZ_SECONDS (14400)
# per surface, FUZZ_SURFACES, FUZZ_SEED; see Documentation/testing.rst.
fuzz: debug-kernel tools
	selftests/fuzz.sh

# 10^8 rows over RDMA between two guests on a stock kernel, checked byte for
# byte, with a fault every few minutes: SOAK_KVER (6.12), SOAK_ROWS
# (100000000), SOAK_FAULT_EVERY (180 s), SOAK_PROCS (2), SOAK_OUT
# (build/soak); see Documentation/testing.rst.
soak: deps tools
	selftests/soak.sh

# The randomized exactness checker for SOAK_EXACT_S seconds (3600) with
# seed SOAK_EXACT_SEED (drawn from the clock and printed when not given:
# the same seed replays the schedules), on SOAK_EXACT_KVER (6.12): in three
# guests (selftests/vm/run-exact.sh: two hosts, with module reloads, and a
# GPU node), or with SOAK_EXACT_GUESTS=1 in one guest that is both
# (selftests/guest/exact_random.sh).  make check runs the three-guest one
# for 60 s.  See Documentation/testing.rst.
soak-exact: deps tools
	$(MAKE) -s -C selftests/guest
	seed=$(or $(SOAK_EXACT_SEED),$$(($$(date +%s) % 1000000))); secs=$(or $(SOAK_EXACT_S),3600); \
	kver=$(or $(SOAK_EXACT_KVER),6.12); \
	echo "soak-exact: seed $$seed, $$secs s"; \
	if [ "$(SOAK_EXACT_GUESTS)" = 1 ]; then \
		selftests/vm/run.sh --kver $$kver --timeout $$((secs + 900)) \
			-- selftests/guest/exact_random.sh $$seed $$secs 3; \
	else \
		selftests/vm/run-exact.sh --kver $$kver --timeout $$((secs + 900)) \
			--seed $$seed --secs $$secs; \
	fi

# BENCH_KVER (6.12), BENCH_ITERS (1000), BENCH_MTU (1500), BENCH_OUT
# (build/bench); then the replicas case in three guests (BENCH_REPLICAS=0:
# not run; BENCH_REPLICAS_ROWS, _ITERS, _ROUNDS); see
# Documentation/performance.rst.
bench: deps tools
	selftests/bench/run.sh $(if $(BENCH_KVER),--kver $(BENCH_KVER)) \
		$(if $(BENCH_ITERS),--iters $(BENCH_ITERS)) \
		$(if $(BENCH_MTU),--mtu $(BENCH_MTU)) \
		$(if $(BENCH_OUT),--out $(BENCH_OUT))

# make bench's replicas case alone (three guests), into $(BENCH_OUT) or
# build/bench-replicas.
bench-replicas: deps tools
	selftests/bench/run.sh --replicas-only $(if $(BENCH_KVER),--kver $(BENCH_KVER)) \
		--out $(or $(BENCH_OUT),build/bench-replicas)

unit: tools
	$(MAKE) -C selftests/unit run

style:
	selftests/style.sh

# The module with W=1 and sparse against every supported kernel and
# architecture (5.10 to 7.3-rc, RT, arm64 with 4K and 16K pages), and the
# tools, libengram and guest programs cross-built for arm64; the header
# trees and the arm64 sysroot are Debian's packages unpacked into $(CACHE),
# not installed.
matrix: deps
	selftests/build-matrix.sh
	selftests/cross-arm64.sh

# CMD and MODPARAMS reach run.sh verbatim (no make expansion: $ and quotes
# survive).  run.sh builds the module for KVER itself (out of tree, build/).
vm-run: tools
	selftests/vm/run.sh --kver "$(KVER)" \
		--params '$(subst ','\'',$(value MODPARAMS))' \
		$(if $(VM_TIMEOUT),--timeout $(VM_TIMEOUT)) \
		-- '$(subst ','\'',$(value CMD))'

demo:
	tools/demo.sh

install: install-module install-tools

krel:
	@echo $(KREL)

install-module: module
	install -D -m 0644 kmod/engram_rdma.ko \
		$(DESTDIR)/lib/modules/$(KREL)/updates/engram_rdma.ko
	depmod $(if $(DESTDIR),-b $(DESTDIR)) $(KREL)
	@# An existing configuration is the admin's: never overwrite it.
	test -e $(DESTDIR)/etc/modprobe.d/engram_rdma.conf || \
		install -D -m 0644 tools/engram_rdma.conf.example \
			$(DESTDIR)/etc/modprobe.d/engram_rdma.conf

install-tools: tools
	$(MAKE) -C tools install DESTDIR=$(DESTDIR) PREFIX=$(PREFIX)

# What install put, but the admin's files under /etc.
uninstall: uninstall-module uninstall-tools

uninstall-module:
	rm -f $(DESTDIR)/lib/modules/$(KREL)/updates/engram_rdma.ko
	depmod $(if $(DESTDIR),-b $(DESTDIR)) $(KREL)

uninstall-tools:
	$(MAKE) -C tools uninstall DESTDIR=$(DESTDIR) PREFIX=$(PREFIX)

dkms-check:
	selftests/dkms-check.sh

# The Debian packages, built with dpkg-buildpackage -us -uc from a copy of
# the tracked tree into build/deb/ and checked with lintian.
deb: deps
	selftests/deb-check.sh

# The packages installed in a 6.12 guest (t_85_packages): its first install
# loads the module prebuilt by dkms-check.sh, its upgrade has DKMS build the
# next version there, under TCG, in about ten minutes.  make check runs it
# too, with the next version prebuilt as well; this is the step alone, for
# iterating on the packages, with the one real build in a guest.
check-packages: deb tools
	$(MAKE) -C selftests/guest
	selftests/dkms-check.sh 6.12 --tarball build/dkms-tarball/6.12
	selftests/vm/run.sh --kver 6.12 --timeout 1800 -- selftests/guest/run.sh t_85_packages

# Replicas across hosts, three guests (selftests/vm/run-replicas.sh): two
# host guests serve one file to a GPU-node guest, one of them unloads its
# module and is then killed under its fetch loop.  make check runs it too
# (REPLICAS_KVERS); this is the step alone.
check-replicas: tools
	$(MAKE) -C selftests/guest
	selftests/vm/run-replicas.sh --kver 6.12 --timeout 1500

clean:
	-$(MAKE) -C $(KDIR) M=$(CURDIR) clean 2>/dev/null
	$(MAKE) -C tools clean
	$(MAKE) -C selftests/unit clean
	$(MAKE) -C selftests/bench clean
	rm -rf build
