// SPDX-License-Identifier: MIT
/*
 * Linked against libptctor.so, whose constructor uses sockets before main.
 * Exits 0 only if that worked and sockets still work in main.
 */
#include "pt.h"

int ctorlib_status(void);

int main(void)
{
	char buf[4];
	int c, a;

	pt_tcp_pair(&c, &a);
	pt_write_all(c, "main", 4);
	pt_read_all(a, buf, 4);
	pt_check(!memcmp(buf, "main", 4));
	printf("ctorprog: main ok, constructor %s\n",
	       ctorlib_status() ? "FAILED" : "ok");
	return ctorlib_status() ? 1 : 0;
}
