// SPDX-License-Identifier: GPL-2.0
#include "kselftest_harness.h"
#include <nproxy/status.h>
TEST(status_names) { ASSERT_STREQ("NPROXY_RESOURCE", nproxy_status_str(NPROXY_RESOURCE)); }
TEST_HARNESS_MAIN
