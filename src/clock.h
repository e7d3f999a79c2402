/* SPDX-License-Identifier: MIT */
#ifndef RSX_CLOCK_H
#define RSX_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t rsx_mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t rsx_now_ms(void)
{
	return rsx_mono_ns() / 1000000;
}

/*
 * The end of a spin (RSOCKX_SPIN_US), read from the clock lazily.  Where
 * the kernel has no usable TSC (a VM on HPET) clock_gettime is a system
 * call that costs more than a poll of the CQ, and a spin that ends within
 * its first polls, the common case under ping-pong, should make none: the
 * first look at the end starts the clock, so the spin lasts the polls
 * before that look longer.  A spin that a shorter timeout bounds starts
 * it at once (eager).
 */
struct rsx_spin_end {
	int64_t at;		/* ns; 0: not started */
	int64_t len;		/* ns */
};

static inline void rsx_spin_end_init(struct rsx_spin_end *e, int64_t us,
				     int eager)
{
	e->len = us * 1000;
	e->at = eager ? rsx_mono_ns() + e->len : 0;
}

static inline int rsx_spin_end_passed(struct rsx_spin_end *e)
{
	if (!e->at) {
		e->at = rsx_mono_ns() + e->len;
		return 0;
	}
	return rsx_mono_ns() >= e->at;
}

#endif
