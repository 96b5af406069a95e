# SPDX-License-Identifier: GPL-2.0
# The test-support library, $(O)/selftests/libnproxy_test.a: code that the
# selftests and the benchmarks share and that must not ship in libnproxy.
#
#   selftests/common/nproxy_test.{h,c}    fork ranks, pin, quantiles, free
#                                         port, fd/thread counts, tmp dirs
#   selftests/common/seam_loopback.{h,c}  in-process loopback network engine
#
# Included (after scripts/build.mk) by selftests/test.mk and bench/Makefile;
# a program links $(NPROXY_TEST_A) before $(LIBNPROXY_A) and includes the
# headers by name with $(NPROXY_TEST_CPPFLAGS).  The top-level Makefile
# builds it once (target test-support) before the areas and bench/, so two
# sub-makes never write it at the same time.

NPROXY_TEST_DIR := $(TOP)/selftests/common
NPROXY_TEST_SRCS := nproxy_test.c seam_loopback.c
NPROXY_TEST_OBJS := $(NPROXY_TEST_SRCS:%.c=$(O)/selftests/support/%.o)
NPROXY_TEST_A := $(O)/selftests/libnproxy_test.a
NPROXY_TEST_CPPFLAGS := -I$(NPROXY_TEST_DIR)
NPROXY_TEST_HDRS := $(NPROXY_TEST_SRCS:%.c=$(NPROXY_TEST_DIR)/%.h)

$(O)/selftests/support/%.o: $(NPROXY_TEST_DIR)/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(NPROXY_TEST_CPPFLAGS) $(ALL_CFLAGS) -MMD -MP -c -o $@ $<

$(NPROXY_TEST_A): $(NPROXY_TEST_OBJS)
	@rm -f $@
	$(AR) rcs $@ $^

test-support: $(NPROXY_TEST_A)

-include $(NPROXY_TEST_OBJS:.o=.d)
.PHONY: test-support
