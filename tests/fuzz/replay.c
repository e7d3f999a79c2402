// SPDX-License-Identifier: MIT
/*
 * Without libFuzzer: feeds every file named on the command line (a
 * directory: every file in it) to LLVMFuzzerTestOneInput(), each in a
 * buffer of exactly its size, and says how many it ran.  Built with the
 * ordinary compiler and sanitizers, so that make check replays the corpora
 * even where clang is missing.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int replay_file(const char *path)
{
	uint8_t *buf = NULL;
	struct stat st;
	size_t len;
	FILE *f;

	f = fopen(path, "rb");
	if (!f || fstat(fileno(f), &st)) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		if (f)
			fclose(f);
		return -1;
	}
	len = st.st_size;
	/* malloc(0) may return NULL: keep one byte, hand over zero */
	buf = malloc(len ? len : 1);
	if (!buf || fread(buf, 1, len, f) != len) {
		fprintf(stderr, "replay: %s: short read\n", path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	LLVMFuzzerTestOneInput(buf, len);
	free(buf);
	return 0;
}

static int replay_path(const char *path, unsigned int *n)
{
	char sub[4096];
	struct dirent *de;
	struct stat st;
	int ret = 0;
	DIR *d;

	if (stat(path, &st)) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (!S_ISDIR(st.st_mode)) {
		if (replay_file(path))
			return -1;
		(*n)++;
		return 0;
	}
	d = opendir(path);
	if (!d)
		return -1;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
		if (replay_path(sub, n))
			ret = -1;
	}
	closedir(d);
	return ret;
}

int main(int argc, char **argv)
{
	unsigned int n = 0;
	int i, ret = 0;

	for (i = 1; i < argc; i++)
		if (replay_path(argv[i], &n))
			ret = 1;
	printf("replayed %u inputs\n", n);
	return ret;
}
