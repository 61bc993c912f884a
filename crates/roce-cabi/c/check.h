/* The CHECK of the C test programs of roce-verbs-so and roce-rdmacm-so: prints "ok <what>" or
 * "FAIL <what> (errno N)" and counts the failures in `failures`, which main returns. The test
 * runner (roce_cabi::testing::run_c_program) passes -I to this directory. */
#ifndef ROCE_CABI_CHECK_H
#define ROCE_CABI_CHECK_H
#include <errno.h>
#include <stdio.h>

static int failures;
#define CHECK(cond, what)                                                     \
	do {                                                                  \
		if (cond)                                                     \
			printf("ok %s\n", what);                              \
		else {                                                        \
			printf("FAIL %s (errno %d)\n", what, errno);          \
			failures++;                                           \
		}                                                             \
	} while (0)

#endif
