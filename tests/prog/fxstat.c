// SPDX-License-Identifier: MIT
/*
 * The legacy stat entry points __fxstat and __fxstat64: binaries built
 * against glibc < 2.33 call them instead of fstat.  New binaries cannot link
 * them by name, so reach them two ways:
 *   symver  a reference bound to __fxstat@GLIBC_2.2.5, exactly what an old
 *           binary carries (the dynamic linker binds it to the first
 *           definition in search order, the preloaded one);
 *   dlsym   dlsym(RTLD_DEFAULT, ...), which only finds a default
 *           (preloaded) definition: libc's are compat-only.
 * Prints where each symbol resolved and what it returned; fortify.test
 * checks the trace.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <sys/stat.h>
#define PT_WANT_OBJECT_NAME
#include "pt.h"

typedef int fxstat_fn(int ver, int fd, struct stat *st);
typedef int fxstat64_fn(int ver, int fd, struct stat64 *st);

extern fxstat_fn pt_old_fxstat;
extern fxstat64_fn pt_old_fxstat64;
__asm__(".symver pt_old_fxstat, __fxstat@GLIBC_2.2.5");
__asm__(".symver pt_old_fxstat64, __fxstat64@GLIBC_2.2.5");

#define PT_STAT_VER 1	/* _STAT_VER_LINUX on x86_64 */

static const char *where(void *fn)
{
	const char *name = pt_object_name(fn);

	return strncmp(name, "libc.", 5) ? name : "libc";
}

static void try(const char *how, fxstat_fn *f, fxstat64_fn *f64, int fd)
{
	struct stat64 st64;
	struct stat st;

	printf("%s __fxstat: %s", how, where((void *)f));
	if (f)
		printf(" -> %s", f(PT_STAT_VER, fd, &st) == 0 &&
		       S_ISSOCK(st.st_mode) ? "socket" : "wrong");
	printf("\n%s __fxstat64: %s", how, where((void *)f64));
	if (f64)
		printf(" -> %s", f64(PT_STAT_VER, fd, &st64) == 0 &&
		       S_ISSOCK(st64.st_mode) ? "socket" : "wrong");
	printf("\n");
}

int main(int argc, char **argv)
{
	int c, a;

	pt_tcp_pair(&c, &a);
	if (argc > 1 && !strcmp(argv[1], "symver"))
		try("symver", pt_old_fxstat, pt_old_fxstat64, a);
	else
		try("dlsym", (fxstat_fn *)dlsym(RTLD_DEFAULT, "__fxstat"),
		    (fxstat64_fn *)dlsym(RTLD_DEFAULT, "__fxstat64"), a);
	close(c);
	close(a);
	return 0;
}
