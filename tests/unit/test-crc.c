// SPDX-License-Identifier: MIT
/*
 * CRC-32C (src/crc.c): the standard check value, the instruction and the
 * tables agree on every length and alignment, a sum goes on across any
 * split of the bytes (the sender's writes and the receiver's reads cut a
 * stream differently), and the iovec walk of the cut-over's sums.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "crc.h"
#include "sock.h"
#include "tap.h"
#include "upgrade-int.h"
#include "wire.h"

#define N 70000

int main(void)
{
	static uint8_t buf[N + 8];
	uint32_t whole, part, hw, sw;
	struct iovec iov[3];
	size_t at, k, len;
	int off, bad = 0, i;

	srandom(7);
	for (at = 0; at < sizeof(buf); at++)
		buf[at] = (uint8_t)random();

	is_int(rsx_crc32c("123456789", 9), 0xe3069283,
	       "CRC-32C of \"123456789\" is the standard check value");
	is_int(~rsx_crc32c_soft(~0u, "123456789", 9) & 0xffffffffu,
	       0xe3069283, "... by the tables too");
	is_int(rsx_crc32c("", 0), 0, "the empty message's is 0");

	for (off = 0; off < 8; off++)
		for (len = 0; len < 80; len++)
			if (rsx_crc32c_update(RSX_SUM_INIT, buf + off, len) !=
			    rsx_crc32c_soft(RSX_SUM_INIT, buf + off, len))
				bad++;
	is_int(bad, 0, "instruction and tables agree on lengths 0..79 at every alignment");
	hw = rsx_crc32c_update(RSX_SUM_INIT, buf + 3, N);
	sw = rsx_crc32c_soft(RSX_SUM_INIT, buf + 3, N);
	is_int(hw, sw, "... and on %d unaligned bytes", N);

	whole = rsx_crc32c_update(RSX_SUM_INIT, buf, N);
	for (i = 0; i < 200; i++) {
		part = RSX_SUM_INIT;
		for (at = 0; at < N; at += k) {
			k = (size_t)random() % (i < 100 ? 13 : 9000);
			if (k > N - at)
				k = N - at;
			part = rsx_crc32c_update(part, buf + at, k);
		}
		if (part != whole)
			bad++;
	}
	is_int(bad, 0, "200 random splits sum to the whole's");

	iov[0] = (struct iovec){ buf, 5 };
	iov[1] = (struct iovec){ buf + 5, 0 };
	iov[2] = (struct iovec){ buf + 5, N - 5 };
	is_int(rsx_sum_iov(RSX_SUM_INIT, iov, 3, 3, 1000),
	       rsx_crc32c_update(RSX_SUM_INIT, buf + 3, 1000),
	       "rsx_sum_iov: 1000 bytes from 3 on, across an empty iovec");
	is_int(rsx_sum_iov(RSX_SUM_INIT, iov, 3, 0, 0), RSX_SUM_INIT,
	       "rsx_sum_iov of nothing leaves the sum");
	ok(rsx_sum_iov(RSX_SUM_INIT, iov, 3, 0, N) >> 32 == 0,
	   "a sum fits the low 32 bits of the CUTOVER field");
	return done_testing();
}
