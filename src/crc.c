// SPDX-License-Identifier: MIT
/*
 * CRC-32C (crc.h): the reflected polynomial 0x82f63b78, eight bytes at a
 * time, by the CPU's instruction or by slicing over eight tables.
 */
#include <pthread.h>
#include <string.h>

#include "compiler.h"
#include "crc.h"

#define RSX_CRC32C_POLY 0x82f63b78u

static uint32_t rsx_crc_tab[8][256];
static pthread_once_t rsx_crc_once = PTHREAD_ONCE_INIT;

/* tab[0] is the byte-wise table; tab[k] a byte followed by k zero bytes */
static void rsx_crc_setup(void)
{
	uint32_t c;
	int i, k;

	for (i = 0; i < 256; i++) {
		c = (uint32_t)i;
		for (k = 0; k < 8; k++)
			c = (c >> 1) ^ (RSX_CRC32C_POLY & -(c & 1));
		rsx_crc_tab[0][i] = c;
	}
	for (i = 0; i < 256; i++)
		for (k = 1; k < 8; k++)
			rsx_crc_tab[k][i] = (rsx_crc_tab[k - 1][i] >> 8) ^
				rsx_crc_tab[0][rsx_crc_tab[k - 1][i] & 0xff];
}

static inline uint32_t rsx_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
	       (uint32_t)p[3] << 24;
}

static uint32_t rsx_crc_slice(uint32_t c, const uint8_t *p, size_t n)
{
	uint32_t lo, hi;

	for (; n >= 8; n -= 8, p += 8) {
		lo = rsx_le32(p) ^ c;
		hi = rsx_le32(p + 4);
		c = rsx_crc_tab[7][lo & 0xff] ^ rsx_crc_tab[6][(lo >> 8) & 0xff] ^
		    rsx_crc_tab[5][(lo >> 16) & 0xff] ^ rsx_crc_tab[4][lo >> 24] ^
		    rsx_crc_tab[3][hi & 0xff] ^ rsx_crc_tab[2][(hi >> 8) & 0xff] ^
		    rsx_crc_tab[1][(hi >> 16) & 0xff] ^ rsx_crc_tab[0][hi >> 24];
	}
	while (n--)
		c = rsx_crc_tab[0][(c ^ *p++) & 0xff] ^ (c >> 8);
	return c;
}

uint32_t rsx_crc32c_soft(uint32_t crc, const void *buf, size_t n)
{
	pthread_once(&rsx_crc_once, rsx_crc_setup);
	return rsx_crc_slice(crc, buf, n);
}

#if defined(__x86_64__)
#include <nmmintrin.h>

__attribute__((target("sse4.2")))
static uint32_t rsx_crc_sse42(uint32_t c, const uint8_t *p, size_t n)
{
	uint64_t c64, v;

	for (; n && ((uintptr_t)p & 7); n--)
		c = _mm_crc32_u8(c, *p++);
	c64 = c;
	for (; n >= 8; n -= 8, p += 8) {
		memcpy(&v, p, 8);
		c64 = _mm_crc32_u64(c64, v);
	}
	c = (uint32_t)c64;
	while (n--)
		c = _mm_crc32_u8(c, *p++);
	return c;
}
#endif

/*
 * libgcc reads the CPU's features in its constructor; a call before it
 * (another library's constructor) sees none and takes the tables, which
 * give the same sum.  Only the tables need setting up.
 */
uint32_t rsx_crc32c_update(uint32_t crc, const void *buf, size_t n)
{
#if defined(__x86_64__)
	if (likely(__builtin_cpu_supports("sse4.2")))
		return rsx_crc_sse42(crc, buf, n);
#endif
	return rsx_crc32c_soft(crc, buf, n);
}
