// SPDX-License-Identifier: MIT
/*
 * where SYM...: print which loaded object defines each symbol first in
 * search order ("librsockx" for $RSOCKX_LIB, or the object's file name),
 * and make one TCP connection so that a traced run has calls to show.
 * Lets a test prove the library is loaded even when it traces nothing.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#define PT_WANT_OBJECT_NAME
#include "pt.h"

int main(int argc, char **argv)
{
	int i, c, a;
	char ch;

	for (i = 1; i < argc; i++)
		printf("%s: %s\n", argv[i],
		       pt_object_name(dlsym(RTLD_DEFAULT, argv[i])));
	pt_tcp_pair(&c, &a);
	pt_write_all(c, "w", 1);
	pt_read_all(a, &ch, 1);
	close(c);
	close(a);
	return 0;
}
