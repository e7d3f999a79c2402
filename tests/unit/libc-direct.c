// SPDX-License-Identifier: MIT
/*
 * The unit tests link the engine without the shim: its table of "real"
 * functions points straight at libc's.
 */
#include "libc.h"

/* compat-only symbols in glibc >= 2.33: not linkable, left NULL */
#pragma weak __fxstat
#pragma weak __fxstat64

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
struct rsx_libc rsx_libc = {
#define RSX_DIRECT(name, ver) .name = name,
	RSX_LIBC_FUNCS(RSX_DIRECT)
#undef RSX_DIRECT
};

void rsx_libc_resolve(void)
{
}
