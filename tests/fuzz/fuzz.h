/* SPDX-License-Identifier: MIT */
#ifndef RSX_FUZZ_H
#define RSX_FUZZ_H

/*
 * Shared by the fuzz targets.  Each defines LLVMFuzzerTestOneInput(); it is
 * linked either with libFuzzer (clang -fsanitize=fuzzer) or with replay.c,
 * a plain main() that feeds it the files of a corpus.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken promise is a crash: libFuzzer and the replay both report it. */
#define FUZZ_ASSERT(cond)						\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "%s:%d: assertion failed: %s\n", \
				__FILE__, __LINE__, #cond);		\
			abort();					\
		}							\
	} while (0)

/* The input as a list of operations and their arguments, read in order. */
struct input {
	const uint8_t *p;
	size_t left;
};

/* The next BYTES bytes, big-endian; missing bytes read as 0. */
static inline uint64_t take(struct input *in, unsigned int bytes)
{
	uint64_t v = 0;

	while (bytes--) {
		v = v << 8 | (in->left ? *in->p : 0);
		if (in->left) {
			in->p++;
			in->left--;
		}
	}
	return v;
}

#endif
