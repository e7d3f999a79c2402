/* SPDX-License-Identifier: MIT */
#ifndef RSX_CRC_H
#define RSX_CRC_H

#include <stddef.h>
#include <stdint.h>

/*
 * CRC-32C (Castagnoli), the one checksum of rsockx: the negotiation
 * messages' (wire.h) and the sums of TCP bytes that an out-of-band
 * cut-over proves (conn.h).  rsx_crc32c_update() goes on from crc over
 * n more bytes, without the inversions at start and end, so that a sum
 * is the same however the stream was cut: a sender's writes and its
 * peer's reads never split it alike.
 *
 * Counted connections run every TCP byte through it, a server every
 * accepted one for RSOCKX_OOB_WINDOW_MS, whatever its client: it takes
 * the SSE 4.2 instruction where the CPU has it (8 bytes a step, over
 * 8 GB/s on the test machine) and eight tables of 256 entries otherwise.
 * Wire version 1 summed with FNV-1a, a multiply per byte: 0.68 GB/s,
 * which held a counted loopback stream at a quarter of TCP's speed.
 */
uint32_t rsx_crc32c_update(uint32_t crc, const void *buf, size_t n);
/* The same without the instruction (the unit test compares the two). */
uint32_t rsx_crc32c_soft(uint32_t crc, const void *buf, size_t n);

#endif
