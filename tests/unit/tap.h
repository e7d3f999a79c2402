/* SPDX-License-Identifier: MIT */
#ifndef RSX_TAP_H
#define RSX_TAP_H

/* A minimal TAP producer for the unit tests. */
#include <stdio.h>

static int tap_n, tap_fail;

#define ok(cond, ...)							\
	({								\
		int ok_c_ = !!(cond);					\
		printf("%sok %d - ", ok_c_ ? "" : "not ", ++tap_n);	\
		printf(__VA_ARGS__);					\
		printf("\n");						\
		if (!ok_c_) {						\
			tap_fail++;					\
			printf("#   failed at %s:%d: %s\n", __FILE__,	\
			       __LINE__, #cond);			\
		}							\
		ok_c_;							\
	})

#define is_int(got, want, ...)						\
	({								\
		long long g_ = (got), w_ = (want);			\
		int r_ = ok(g_ == w_, __VA_ARGS__);			\
		if (!r_)						\
			printf("#   got %lld, want %lld\n", g_, w_);	\
		r_;							\
	})

static inline int done_testing(void)
{
	printf("1..%d\n", tap_n);
	fflush(stdout);
	return tap_fail ? 1 : 0;
}

#endif
