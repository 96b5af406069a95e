# SPDX-License-Identifier: GPL-2.0
# Shared rules for one selftests/<area>/ directory.
#
# Every <area>/*.c is one kselftest-harness test program; every <area>/*.sh
# is one shell test (TAP on stdout, see scripts/tap.sh).  Both land in
# $(O)/selftests/<area>/, where scripts/run-tests finds and runs them.
# Files named *.vm.c / *.vm.sh land in $(O)/selftests/vm/ instead and are
# run inside the VM by scripts/vmtest (kernel-module tests).
# Every program links the test-support library (testlib/testlib.mk)
# and finds its headers by name ("nproxy_test.h", "seam_loopback.h",
# "futex_spy.h").
# Set AREA before including; TOP is ../.. .
TOP := ../..
include $(TOP)/scripts/build.mk
include $(TOP)/testlib/testlib.mk

C_TESTS := $(filter-out %.vm.c,$(wildcard *.c))
SH_TESTS := $(filter-out %.vm.sh,$(wildcard *.sh))
VM_C_TESTS := $(wildcard *.vm.c)
VM_SH_TESTS := $(wildcard *.vm.sh)

BINS := $(C_TESTS:%.c=$(O)/selftests/$(AREA)/%) $(SH_TESTS:%=$(O)/selftests/$(AREA)/%) \
	$(VM_C_TESTS:%.vm.c=$(O)/selftests/vm/$(AREA)-%) \
	$(VM_SH_TESTS:%.vm.sh=$(O)/selftests/vm/$(AREA)-%.sh)

FABRIC_LIBS := $(shell pkg-config --libs libfabric 2>/dev/null || echo -lfabric)
# The harness defines non-static helpers without prototypes.
TEST_CFLAGS += -Wno-missing-prototypes
TEST_CPPFLAGS += $(NPROXY_TEST_CPPFLAGS)
TEST_LDLIBS += $(NPROXY_TEST_A) $(LIBNPROXY_A) $(FABRIC_LIBS) -pthread

all: $(BINS)

$(O)/selftests/$(AREA)/%: %.c $(KSFT_HDRS) $(NPROXY_TEST_A) $(NPROXY_TEST_HDRS) $(LIBNPROXY_A) $(TEST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(TEST_CPPFLAGS) $(ALL_CFLAGS) $(TEST_CFLAGS) -o $@ $< $(TEST_SRCS) $(LDFLAGS) $(TEST_LDLIBS)

$(O)/selftests/vm/$(AREA)-%: %.vm.c $(KSFT_HDRS) $(NPROXY_TEST_A) $(NPROXY_TEST_HDRS) $(LIBNPROXY_A) $(TEST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(TEST_CPPFLAGS) $(ALL_CFLAGS) $(TEST_CFLAGS) -o $@ $< $(TEST_SRCS) $(LDFLAGS) $(TEST_LDLIBS)

$(O)/selftests/$(AREA)/%.sh: %.sh
	$(install-script)

$(O)/selftests/vm/$(AREA)-%.sh: %.vm.sh
	$(install-script)

clean:
	rm -rf $(O)/selftests/$(AREA) $(O)/selftests/vm/$(AREA)-*

.PHONY: all clean
