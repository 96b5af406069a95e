# SPDX-License-Identifier: GPL-2.0
# nproxy top-level build.
#
#   make              library, tools, selftest and bench binaries; the
#                     module too when kernel headers ($(KDIR)) are present
#   make run          deps + build + the main job (tools/nproxy-run) on its defaults
#   make check        deps + build (module required) + every selftest: host
#                     areas here, build/selftests/vm/ in one qemu boot with
#                     kmod/nproxy.ko loaded; ends with "N passed, N failed, N skipped"
#   make bench        deps + build + bench/run: build/bench/report/ (report.md,
#                     results.json, plots); QUICK=1: under two minutes, no VM
#   make install      library, headers, tools, man pages, pkg-config, bash
#                     completion, examples' sources, udev rule, sysusers.d group, modprobe.d
#                     (DESTDIR PREFIX BINDIR SBINDIR LIBDIR ...; see below);
#                     the module goes via dkms
#   make uninstall    removes what install put (same variables)
#   make lint         checkpatch + sparse (C=2 W=1) over kmod/ and the uapi header;
#                     lint-lib: the library's exports against lib/libnproxy.map,
#                     call graph, symbol prefix; lint-tools: no file circle
#                     in tools/; long functions in every C folder;
#                     scripts/words-check.sh over the whole tree
#   make fuzz         nproxy.ko's fuzzer in the VM, longer than make check runs it
#                     (FUZZ_OPS=1000000 FUZZ_SEED=16 FUZZ_THREADS=4 FUZZ_TIMEOUT=s)
#   make asan | tsan  host tests built with ASan+UBSan / TSan (build-asan/, build-tsan/)
#   make check-valgrind  the library areas' tests under valgrind memcheck (leaks too)
#   make mutation     mutants of lib/ and include/nproxy/ against the tests
#                     (scripts/mutation.py: MUTATION_FILES, MUTATION_LIMIT,
#                     MUTATION_SEED, MUTATION_JOBS): build/mutation/report.md
#   make mutation-kmod  mutants of kmod/, each module booted in the VM against
#                     the kmod selftests (scripts/mutation-kmod, the same
#                     variables): build/mutation-kmod/report.md
#   make clean
#
# Userspace outputs go to $(O) (build/, or build-$(SAN)/ with SAN=asan|tsan);
# see Documentation/development.md.

SHELL := /bin/bash
TOP := $(CURDIR)
SAN ?=
ifeq ($(SAN),)
O := $(TOP)/build
else
O := $(TOP)/build-$(SAN)
endif
export SAN

# The Debian 6.1 kernel's headers, even though `uname -r` is another kernel.
KDIR ?= $(shell ls -d /lib/modules/6.1.0-*-amd64/build 2>/dev/null | sort -V | \
	while read d; do [ -e "$$d/Makefile" ] && echo "$$d"; done | tail -n1)
export KDIR

# Install directories (GNU names; all honour DESTDIR).  The system
# integration files go where udev, systemd-sysusers and kmod look for them,
# whatever PREFIX is; override UDEVRULESDIR etc. to put them elsewhere.
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR ?= $(PREFIX)/bin
SBINDIR ?= $(PREFIX)/sbin
LIBDIR ?= $(PREFIX)/lib
INCLUDEDIR ?= $(PREFIX)/include
DATADIR ?= $(PREFIX)/share
MANDIR ?= $(DATADIR)/man
EXAMPLEDIR ?= $(DATADIR)/doc/nproxy/examples
PKGCONFIGDIR ?= $(LIBDIR)/pkgconfig
BASHCOMPDIR ?= $(DATADIR)/bash-completion/completions
UDEVRULESDIR ?= $(or $(shell pkg-config --variable=udevdir udev 2>/dev/null),/lib/udev)/rules.d
SYSUSERSDIR ?= $(or $(shell pkg-config --variable=sysusersdir systemd 2>/dev/null),/usr/lib/sysusers.d)
MODPROBEDIR ?= /usr/lib/modprobe.d
MODULESLOADDIR ?= /usr/lib/modules-load.d
# 1: also install modules-load.d/nproxy.conf (load the module at boot).
INSTALL_MODULES_LOAD ?= 0
VERSION := $(shell cat $(TOP)/VERSION)

SUBMAKE = $(MAKE) --no-print-directory
# Sub-directories owned by other areas build only once their Makefile exists.
have = $(wildcard $(TOP)/$(1)/Makefile)
TEST_AREAS := $(patsubst selftests/%/Makefile,%,$(sort $(wildcard selftests/*/Makefile)))
# Host test areas run by check-host (the sanitizer builds narrow this).
CHECK_AREAS ?= $(TEST_AREAS)

.DEFAULT_GOAL := all
.PHONY: all lib tools test-support selftests bench-build module module-required deps run \
	check check-host check-scale check-valgrind mutation mutation-kmod bench install uninstall clean lint lint-lib lint-tools long-functions checkpatch sparse words asan tsan fuzz help

all: lib tools selftests bench-build $(if $(SAN),,module)

lib:
	+@$(SUBMAKE) -C lib

tools: lib
	+$(if $(call have,tools),@$(SUBMAKE) -C tools,@echo "tools: no tools/Makefile yet, skipped")

# The test-support library (testlib/): helpers and the loopback seam shared
# by the selftests and bench/, built once before either uses it.
test-support: lib
	+@$(SUBMAKE) -C testlib

selftests: lib test-support
	+@set -e; for a in $(TEST_AREAS); do $(SUBMAKE) -C selftests/$$a; done

bench-build: lib test-support
	+$(if $(call have,bench),@$(SUBMAKE) -C bench,@echo "bench: no bench/Makefile yet, skipped")

# `make` builds the module only when the kernel headers are there;
# `make check` requires it (module-required).
module:
	+@if [ -z "$(call have,kmod)" ]; then echo "kmod: no kmod/Makefile yet, module skipped"; \
	elif [ -z "$(KDIR)" ]; then echo "kmod: no kernel headers (/lib/modules/6.1.0-*-amd64/build), module skipped; scripts/deps.sh installs them"; \
	else $(SUBMAKE) -C kmod KDIR=$(KDIR); fi

module-required:
	+@if [ -z "$(call have,kmod)" ]; then echo "kmod: SKIP: no kmod/Makefile yet, the module cannot be built"; \
	elif [ -z "$(KDIR)" ]; then echo "kmod: no kernel headers at /lib/modules/6.1.0-*-amd64/build (run scripts/deps.sh)" >&2; exit 1; \
	else $(SUBMAKE) -C kmod KDIR=$(KDIR); fi

deps:
	@$(TOP)/scripts/deps.sh

run: deps
	+@$(SUBMAKE) all
	@if [ -x $(O)/bin/nproxy-run ]; then exec $(O)/bin/nproxy-run; \
	else echo "make run: $(O)/bin/nproxy-run was not built; nothing to run"; fi

# One closing line "N passed, N failed, N skipped" counts host and VM tests.
# A failed bootstrap or build still ends with the closing line (one failure).
check:
	+@$(TOP)/scripts/deps.sh && $(SUBMAKE) lib tools selftests bench-build && $(SUBMAKE) module-required || \
		{ echo "make check: bootstrap or build failed (see above)"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
	@$(TOP)/scripts/check --build $(O) --areas "$(CHECK_AREAS)" --vm

# Host tests only, in $(O) (used by asan/tsan and for quick iteration).
check-host:
	+@$(SUBMAKE) lib tools selftests || \
		{ echo "make check-host: build failed (see above)"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
	@$(TOP)/scripts/check --build $(O) --areas "$(CHECK_AREAS)"

# The multi-host tests at scale (network namespaces as hosts; needs root):
# selftests/net/net_scale.sh at SCALE_HOSTS x SCALE_RANKS (default 8 x 8,
# minutes on 2 cpus; make check runs it at 4 x 2).  80 ranks:
# make check-scale SCALE_HOSTS=10 SCALE_RANKS=8 (longer; see net.md).
SCALE_HOSTS ?= 8
SCALE_RANKS ?= 8
check-scale:
	+@$(SUBMAKE) lib tools selftests || \
		{ echo "make check-scale: build failed (see above)"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
	NPROXY_TOP=$(TOP) NPROXY_SCALE_HOSTS=$(SCALE_HOSTS) NPROXY_SCALE_RANKS=$(SCALE_RANKS) \
		$(O)/selftests/net/net_scale.sh

# foundation/ and packaging/ hold shell tests of the machinery and the
# release build: nothing to instrument.
asan:
	+@$(SUBMAKE) SAN=asan CHECK_AREAS="$(filter-out foundation packaging,$(TEST_AREAS))" check-host

# TSan for the threaded areas.  tools/ is left out: run_launcher.sh's veth
# case fails under ASan and TSan; add it once it is clean:
# make tsan TSAN_AREAS="$(LIB_AREAS) tools".
LIB_AREAS := common handshake proxy net bananaphone rank coll
TSAN_AREAS ?= $(LIB_AREAS)
tsan:
	+@$(SUBMAKE) SAN=tsan CHECK_AREAS="$(filter $(TSAN_AREAS),$(TEST_AREAS))" check-host

# Valgrind memcheck, leaks included, over the areas whose tests run the
# library in-process (forked ranks included), on the normal build:
# one failure per test with an invalid access or a definite/indirect leak.
VALGRIND_AREAS ?= common handshake proxy bananaphone
check-valgrind:
	+@$(TOP)/scripts/deps.sh && $(SUBMAKE) lib selftests || \
		{ echo "make check-valgrind: build failed (see above)"; echo "0 passed, 1 failed, 0 skipped"; exit 1; }
	@$(TOP)/scripts/check-valgrind --build $(O) $(filter $(VALGRIND_AREAS),$(TEST_AREAS))

# Not part of check: hours for every mutant; MUTATION_LIMIT=N samples.
MUTATION_JOBS ?= 2
mutation:
	+@$(SUBMAKE) lib selftests
	@$(TOP)/scripts/mutation.py -j $(MUTATION_JOBS)

# Not part of check either: a module build per mutant, a VM boot per
# MUTATION_KMOD_BATCH of them; nice 19, the VM is CPU heavy.
mutation-kmod:
	+@$(SUBMAKE) lib selftests && $(SUBMAKE) module-required
	@nice -n 19 $(TOP)/scripts/mutation-kmod -j $(MUTATION_JOBS)

# selftests/kmod/fuzz.vm.c alone in one VM boot (make check runs it with
# 100000 operations).  The bound scales with the operations: about 1700/s
# under TCG on a loaded 2-core host.
FUZZ_OPS ?= 1000000
FUZZ_SEED ?= 16
FUZZ_THREADS ?= 4
FUZZ_TIMEOUT ?= $(shell echo $$(( $(FUZZ_OPS) / 300 + 120 )))
fuzz:
	+@$(SUBMAKE) lib selftests && $(SUBMAKE) module-required
	NPROXY_FUZZ_OPS=$(FUZZ_OPS) NPROXY_FUZZ_SEED=$(FUZZ_SEED) NPROXY_FUZZ_THREADS=$(FUZZ_THREADS) \
		NPROXY_FUZZ_TIMEOUT=$(FUZZ_TIMEOUT) $(TOP)/scripts/vmtest --timeout $$(( $(FUZZ_TIMEOUT) + 120 )) \
		--module $(TOP)/kmod/nproxy.ko -- $(O)/selftests/vm/kmod-fuzz

bench: deps
	@command -v gnuplot >/dev/null || echo "make bench: gnuplot missing: the report will have no plots (scripts/deps.sh installs gnuplot-nox)"
	+@$(SUBMAKE) all
	+@if [ -x bench/run ]; then exec bench/run; \
	elif [ -n "$(call have,bench)" ] && grep -q '^run:' bench/Makefile; then $(SUBMAKE) -C bench run; \
	else echo "make bench: no bench/run in this tree; nothing to measure"; fi

# `make install` is userspace plus the files that make the module usable
# (udev rule, group, modprobe.d); the module itself goes via dkms
# (make -C kmod dkms-src).  `make uninstall` removes exactly what install put.
INSTALL_LIB = $(DESTDIR)$(LIBDIR)
MAN_PAGES := $(wildcard Documentation/man/*.[1-8])
EXAMPLE_FILES := $(wildcard examples/*.c) examples/Makefile
# One ".so" page per name in a section 3 page's NAME (scripts/man-aliases.sh).
MAN3_PAGES := $(filter %.3,$(MAN_PAGES))
MAN3_ALIASES = $(shell $(TOP)/scripts/man-aliases.sh $(MAN3_PAGES))
INSTALLED_FILES = $(INSTALL_LIB)/libnproxy.a $(INSTALL_LIB)/libnproxy.so.0 $(INSTALL_LIB)/libnproxy.so \
	$(DESTDIR)$(PKGCONFIGDIR)/libnproxy.pc \
	$(addprefix $(DESTDIR)$(INCLUDEDIR)/nproxy/,$(notdir $(wildcard include/nproxy/*.h))) \
	$(DESTDIR)$(INCLUDEDIR)/linux/nproxy.h \
	$(DESTDIR)$(BINDIR)/nproxy-run $(DESTDIR)$(SBINDIR)/nproxyctl \
	$(addprefix $(DESTDIR)$(BINDIR)/nproxy_,all_reduce_perf all_gather_perf sendrecv_perf) \
	$(foreach m,$(MAN_PAGES),$(DESTDIR)$(MANDIR)/man$(subst .,,$(suffix $(m)))/$(notdir $(m))) \
	$(foreach a,$(MAN3_ALIASES),$(DESTDIR)$(MANDIR)/man3/$(firstword $(subst =, ,$(a))).3) \
	$(DESTDIR)$(BASHCOMPDIR)/nproxy-run $(DESTDIR)$(BASHCOMPDIR)/nproxyctl \
	$(DESTDIR)$(UDEVRULESDIR)/60-nproxy.rules $(DESTDIR)$(SYSUSERSDIR)/nproxy.conf \
	$(DESTDIR)$(MODPROBEDIR)/nproxy.conf $(DESTDIR)$(MODULESLOADDIR)/nproxy.conf \
	$(addprefix $(DESTDIR)$(EXAMPLEDIR)/,$(notdir $(EXAMPLE_FILES)))

install: lib tools
	install -d $(INSTALL_LIB) $(DESTDIR)$(PKGCONFIGDIR) $(DESTDIR)$(INCLUDEDIR)/nproxy $(DESTDIR)$(INCLUDEDIR)/linux
	install -m 0644 $(O)/lib/libnproxy.a $(INSTALL_LIB)/
	install -m 0755 $(O)/lib/libnproxy.so.0 $(INSTALL_LIB)/
	ln -sf libnproxy.so.0 $(INSTALL_LIB)/libnproxy.so
	sed -e 's|@PREFIX@|$(PREFIX)|; s|@VERSION@|$(VERSION)|' \
		-e 's|@LIBDIR@|$(LIBDIR)|; s|@INCLUDEDIR@|$(INCLUDEDIR)|' \
		lib/libnproxy.pc.in >$(DESTDIR)$(PKGCONFIGDIR)/libnproxy.pc
	install -m 0644 include/nproxy/*.h $(DESTDIR)$(INCLUDEDIR)/nproxy/
	install -m 0644 include/uapi/linux/nproxy.h $(DESTDIR)$(INCLUDEDIR)/linux/
	+$(SUBMAKE) -C tools install DESTDIR=$(DESTDIR) BINDIR=$(BINDIR) SBINDIR=$(SBINDIR)
	@set -e; for m in $(MAN_PAGES); do s=$${m##*.}; \
		echo "install -D -m 0644 $$m $(DESTDIR)$(MANDIR)/man$$s/$${m##*/}"; \
		install -D -m 0644 $$m $(DESTDIR)$(MANDIR)/man$$s/$${m##*/}; done
	install -d $(DESTDIR)$(EXAMPLEDIR)
	install -m 0644 $(EXAMPLE_FILES) $(DESTDIR)$(EXAMPLEDIR)/
	@set -e; aliases=$$($(TOP)/scripts/man-aliases.sh $(MAN3_PAGES)); \
		install -d $(DESTDIR)$(MANDIR)/man3; \
		for a in $$aliases; do f=$(DESTDIR)$(MANDIR)/man3/$${a%%=*}.3; \
			echo ".so man3/$${a#*=}" >$$f; chmod 0644 $$f; done; \
		echo "man3: $$(wc -w <<<"$$aliases") alias pages (.so) in $(DESTDIR)$(MANDIR)/man3"
	install -D -m 0644 dist/nproxy-run.bash-completion $(DESTDIR)$(BASHCOMPDIR)/nproxy-run
	install -D -m 0644 dist/nproxyctl.bash-completion $(DESTDIR)$(BASHCOMPDIR)/nproxyctl
	install -D -m 0644 kmod/60-nproxy.rules $(DESTDIR)$(UDEVRULESDIR)/60-nproxy.rules
	install -D -m 0644 dist/nproxy.sysusers $(DESTDIR)$(SYSUSERSDIR)/nproxy.conf
	install -D -m 0644 dist/nproxy.modprobe $(DESTDIR)$(MODPROBEDIR)/nproxy.conf
	$(if $(filter 1,$(INSTALL_MODULES_LOAD)),install -D -m 0644 dist/nproxy.modules-load $(DESTDIR)$(MODULESLOADDIR)/nproxy.conf)
	@# Into the live system (no DESTDIR): create the group and reload udev now.
	@if [ -z "$(DESTDIR)" ]; then \
		if command -v systemd-sysusers >/dev/null; then systemd-sysusers $(SYSUSERSDIR)/nproxy.conf || true; \
		elif ! getent group nproxy >/dev/null; then groupadd -r nproxy || true; fi; \
		if command -v udevadm >/dev/null; then udevadm control --reload 2>/dev/null || true; fi; \
	fi

uninstall:
	rm -f $(INSTALLED_FILES)
	-rmdir $(DESTDIR)$(INCLUDEDIR)/nproxy 2>/dev/null
	-rmdir $(DESTDIR)$(EXAMPLEDIR) $(dir $(DESTDIR)$(EXAMPLEDIR)) 2>/dev/null

clean:
	rm -rf $(TOP)/build $(TOP)/build-asan $(TOP)/build-tsan
	+@if [ -n "$(call have,kmod)" ] && [ -n "$(KDIR)" ]; then $(SUBMAKE) -C kmod KDIR=$(KDIR) clean; fi

# checkpatch.pl (with spelling.txt and const_structs.checkpatch beside it)
# from Debian's linux-source tarball, extracted once into the build tree.
LINUX_SOURCE_TAR ?= $(firstword $(wildcard /usr/src/linux-source-6.1.tar.xz /usr/src/linux-source-*.tar.xz))
CHECKPATCH := $(TOP)/build/checkpatch/checkpatch.pl
LINT_FILES = $(filter-out %.mod.c,$(wildcard kmod/*.c kmod/*.h)) include/uapi/linux/nproxy.h

$(CHECKPATCH):
	@test -n "$(LINUX_SOURCE_TAR)" || { echo "lint: no /usr/src/linux-source-*.tar.xz (run scripts/deps.sh)" >&2; exit 1; }
	@mkdir -p $(dir $@)
	tar -xJf $(LINUX_SOURCE_TAR) -C $(dir $@) --strip-components=2 --wildcards \
		'*/scripts/checkpatch.pl' '*/scripts/spelling.txt' '*/scripts/const_structs.checkpatch'
	@touch $@

# Every checker always runs; any one failing fails lint.
lint:
	+@rc=0; $(SUBMAKE) checkpatch || rc=1; $(SUBMAKE) sparse || rc=1; \
		$(SUBMAKE) lint-lib || rc=1; $(SUBMAKE) lint-tools || rc=1; \
		$(SUBMAKE) long-functions || rc=1; $(SUBMAKE) words || rc=1; \
		if [ $$rc = 0 ]; then echo "lint: clean"; else echo "lint: FAILED (see above)" >&2; fi; exit $$rc

# The library's shape, from the release build's objects (scripts/lib-graph.py):
# the exported symbols, lib/libnproxy.map and the NPROXY_API declarations of
# include/nproxy/ agree; no call cycle between files, no call against the
# subsystem order, every non-static internal symbol prefixed npx_.
LIB_GRAPH_FLAGS ?= --map lib/libnproxy.map --headers include/nproxy
lint-lib:
	+@$(SUBMAKE) -s SAN= O=$(TOP)/build lib
	@rc=0; python3 $(TOP)/scripts/lib-graph.py $(LIB_GRAPH_FLAGS) $(TOP)/build/lib \
		$(TOP)/build/lib/libnproxy.so.0 >$(TOP)/build/lib-graph.txt || rc=1; \
		sed -n '/^internal non-static/,$$p' $(TOP)/build/lib-graph.txt; \
		grep '^map:' $(TOP)/build/lib-graph.txt; \
		if [ $$rc = 0 ]; then echo "lint-lib: clean (full report: build/lib-graph.txt)"; \
		else echo "lint-lib: FAILED (full report: build/lib-graph.txt)" >&2; fi; exit $$rc

# No call cycle between the files of tools/ (scripts/file-graph.py over the
# release build's objects; the graph is in build/tools-graph.txt).
lint-tools:
	+@$(SUBMAKE) -s SAN= O=$(TOP)/build tools
	@python3 $(TOP)/scripts/file-graph.py --sources $(TOP)/tools $(TOP)/build/tools \
		>$(TOP)/build/tools-graph.txt; rc=$$?; \
		sed -n '/^call cycles/,$$p' $(TOP)/build/tools-graph.txt; exit $$rc

# No function over 80 lines in any C folder unless scripts/long-functions.allow
# says why.
C_DIRS := kmod lib tools selftests bench examples
long-functions:
	@$(TOP)/scripts/long-functions.sh $(C_DIRS)

checkpatch: $(CHECKPATCH)
	$(CHECKPATCH) --no-tree --strict --terse --show-types --ignore SPDX_LICENSE_TAG -f $(LINT_FILES)

# Words from outside the project (Documentation/development.md, "Words").
words:
	@$(TOP)/scripts/words-check.sh $(TOP)

sparse:
	@test -n "$(KDIR)" || { echo "lint: no kernel headers (run scripts/deps.sh)" >&2; exit 1; }
	@command -v sparse >/dev/null || { echo "lint: sparse not installed (run scripts/deps.sh)" >&2; exit 1; }
	@# C=2 checks every file, rebuilt or not; sparse warnings fail the target.
	@mkdir -p $(TOP)/build
	+@$(MAKE) --no-print-directory -C $(KDIR) M=$(TOP)/kmod C=2 W=1 modules 2>&1 | tee $(TOP)/build/sparse.log; \
		test $${PIPESTATUS[0]} -eq 0 || exit 1; \
		if grep -E '(warning|error):' $(TOP)/build/sparse.log | grep -v 'Skipping BTF'; then \
			echo "lint: sparse/W=1 reported the warnings above" >&2; exit 1; fi

help:
	@sed -n '2,/^$$/s/^# \{0,1\}//p' Makefile
