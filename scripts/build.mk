# SPDX-License-Identifier: GPL-2.0
# Shared build settings, included by every userspace sub-Makefile.
#
#   make            -> build/          (-O2 -g)
#   make SAN=asan   -> build-asan/     (ASan + UBSan)
#   make SAN=tsan   -> build-tsan/     (TSan)
#
# Every sub-Makefile sets TOP (relative path to the repo root) before
# including this file, and puts its outputs under $(O)/<its dir>/.

.DEFAULT_GOAL := all
TOP := $(abspath $(TOP))
SAN ?=
ifeq ($(SAN),)
O ?= $(TOP)/build
else
O ?= $(TOP)/build-$(SAN)
endif

CC ?= cc
ifeq ($(CC),cc)
CC := gcc
endif
VERSION := $(shell cat $(TOP)/VERSION 2>/dev/null || echo 0.0.0)

WARN := -Wall -Wextra -Werror -Wno-unused-parameter -Wshadow -Wformat=2 \
	-Wstrict-prototypes -Wmissing-prototypes
CFLAGS ?= -O2 -g
# A command-line CPPFLAGS (make CPPFLAGS=...) is appended to the project's
# -I/-D instead of replacing them; from the environment (dpkg-buildflags) it
# is kept and ours are added.  Only the command-line case needs `override`,
# which would make later plain `CPPFLAGS +=` lines ignored: so only then.
NPROXY_CPPFLAGS := -D_GNU_SOURCE -I$(TOP)/include -I$(TOP)/include/uapi \
	-DNPROXY_VERSION='"$(VERSION)"'
ifeq ($(origin CPPFLAGS),command line)
override CPPFLAGS := $(NPROXY_CPPFLAGS) $(CPPFLAGS)
else
CPPFLAGS += $(NPROXY_CPPFLAGS)
endif
BASE_CFLAGS := -std=gnu11 $(WARN) -pthread -fno-strict-aliasing

ifeq ($(SAN),asan)
BASE_CFLAGS += -fsanitize=address,undefined -fno-omit-frame-pointer \
	-fno-sanitize-recover=undefined
LDFLAGS += -fsanitize=address,undefined
else ifeq ($(SAN),tsan)
BASE_CFLAGS += -fsanitize=thread -fno-omit-frame-pointer
LDFLAGS += -fsanitize=thread
endif
ALL_CFLAGS = $(BASE_CFLAGS) $(CFLAGS)
LDLIBS_THREADS := -pthread

# libnproxy, as the tools and tests link it (static, so test binaries run
# from the build tree and inside the VM without LD_LIBRARY_PATH).
LIBNPROXY_A := $(O)/lib/libnproxy.a
LIBNPROXY_LIBS := $(LIBNPROXY_A) $(shell pkg-config --libs libfabric 2>/dev/null || echo -lfabric) -pthread

# The kselftest harness is extracted from Debian's linux-source tarball once
# per build tree and never committed.
KSFT_DIR := $(O)/kselftest
KSFT_HDRS := $(KSFT_DIR)/kselftest_harness.h $(KSFT_DIR)/kselftest.h
LINUX_SOURCE_TAR ?= $(firstword $(wildcard /usr/src/linux-source-6.1.tar.xz /usr/src/linux-source-*.tar.xz))
TEST_CPPFLAGS += -I$(KSFT_DIR)

$(KSFT_HDRS) &:
	@test -n "$(LINUX_SOURCE_TAR)" || { echo "kselftest harness: no /usr/src/linux-source-*.tar.xz (run scripts/deps.sh)" >&2; exit 1; }
	@mkdir -p $(KSFT_DIR)
	@tar -xJf $(LINUX_SOURCE_TAR) -C $(KSFT_DIR) --strip-components=4 --wildcards \
		'*/tools/testing/selftests/kselftest_harness.h' \
		'*/tools/testing/selftests/kselftest.h'
	@touch $(KSFT_HDRS)

# Generic object rule; sub-Makefiles list objects under $(O).
$(O)/%.o: $(TOP)/%.c
	@mkdir -p $(dir $@)
	$(CC) $(CPPFLAGS) $(ALL_CFLAGS) $(EXTRA_CFLAGS) -MMD -MP -c -o $@ $<
