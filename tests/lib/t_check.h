/*
 * CHECK and CHECK_EQ for tests without a framework: on failure print where and what,
 * then abort (so the test fails under ASan and meson alike).
 */
#ifndef ZEST_TEST_CHECK_H
#define ZEST_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#define CHECK(x)                                                                              \
	do {                                                                                  \
		if (!(x)) {                                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #x); \
			abort();                                                              \
		}                                                                             \
	} while (0)
#define CHECK_EQ(a, b)                                                                        \
	do {                                                                                  \
		long long _a = (long long)(a), _b = (long long)(b);                           \
		if (_a != _b) {                                                               \
			fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", __FILE__, \
			        __LINE__, #a, _a, #b, _b);                                    \
			abort();                                                              \
		}                                                                             \
	} while (0)

#endif
