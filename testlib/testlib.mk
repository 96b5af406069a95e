# SPDX-License-Identifier: GPL-2.0
# The test-support library, $(O)/testlib/libnproxy_test.a: code that the
# selftests and the benchmarks share and that must not ship in libnproxy.
#
#   testlib/nproxy_test.{h,c}    fork ranks, pin, quantiles, free port,
#                                fd/thread counts, tmp dirs
#   testlib/seam_loopback.{h,c}  in-process loopback network engine
#   testlib/rank_death.{h,c}     a rank's death and what the others saw of it
#   testlib/futex_spy.h          a spy on the library's futex calls (header only)
#
# Included (after scripts/build.mk) by selftests/test.mk and bench/Makefile;
# a program links $(NPROXY_TEST_A) before $(LIBNPROXY_A) and includes the
# headers by name with $(NPROXY_TEST_CPPFLAGS).  The top-level Makefile
# builds it once (target test-support, testlib/Makefile) before the areas
# and bench/, so two sub-makes never write it at the same time.

NPROXY_TEST_DIR := $(TOP)/testlib
NPROXY_TEST_SRCS := nproxy_test.c seam_loopback.c rank_death.c
NPROXY_TEST_OBJS := $(NPROXY_TEST_SRCS:%.c=$(O)/testlib/%.o)
NPROXY_TEST_A := $(O)/testlib/libnproxy_test.a
NPROXY_TEST_CPPFLAGS := -I$(NPROXY_TEST_DIR)
NPROXY_TEST_HDRS := $(NPROXY_TEST_SRCS:%.c=$(NPROXY_TEST_DIR)/%.h) $(NPROXY_TEST_DIR)/futex_spy.h

$(O)/testlib/%.o: $(NPROXY_TEST_DIR)/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(NPROXY_TEST_CPPFLAGS) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(NPROXY_TEST_A): $(NPROXY_TEST_OBJS)
	@rm -f $@
	$(AR) rcs $@ $^

test-support: $(NPROXY_TEST_A)

-include $(NPROXY_TEST_OBJS:.o=.d)
.PHONY: test-support

# For the programs' makefiles (selftests/test.mk, bench/Makefile): a link
# asks lib/ to bring libnproxy up to date first, and scripts are installed
# with $(install-script).
$(LIBNPROXY_A): FORCE
	@$(MAKE) --no-print-directory -C $(TOP)/lib
FORCE:
.PHONY: FORCE

define install-script
@mkdir -p $(dir $@)
install -m 0755 $< $@
endef
