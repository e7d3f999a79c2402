// SPDX-License-Identifier: MIT
/*
 * Fuzz target: the rules parser (src/config.c), as RSOCKX_RULES and as a
 * rules file.  The first byte chooses how the rest is given:
 *
 *   0  rsx_rules_parse() on the raw bytes (a file's text: NULs included)
 *   1  rsx_config_load() with the bytes up to the first NUL as RSOCKX_RULES
 *      and RSOCKX_DEFAULT taken from the next NUL-terminated piece
 *   2  rsx_config_load() with the bytes written to a rules file
 *   3  rsx_parse_size() of the bytes up to the first NUL
 *
 * Whatever the input, an accepted table holds only rules that the matcher
 * can use (prefix within the family, port range in order, PROGRAM a short
 * string), a rejected one holds none and an error names its source, and
 * matching any address gives a valid action.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "config.h"
#include "fuzz.h"

static struct rsx_rules rules;
static struct rsx_config conf;

static void check_rules(const struct rsx_rules *rs)
{
	const struct rsx_rule *r;
	unsigned int i;

	FUZZ_ASSERT(rs->n <= RSX_RULES_MAX);
	for (i = 0; i < rs->n; i++) {
		r = &rs->r[i];
		FUZZ_ASSERT(r->action <= RSX_ACT_RDMA);
		FUZZ_ASSERT(r->dir >= RSX_DIR_CONNECT && r->dir <= RSX_DIR_ANY);
		FUZZ_ASSERT(r->family == 0 || r->family == AF_INET ||
			    r->family == AF_INET6);
		FUZZ_ASSERT(r->prefix <= (r->family == AF_INET ? 32 : 128));
		FUZZ_ASSERT(r->family || r->prefix == 0);
		FUZZ_ASSERT(r->port_lo <= r->port_hi);
		FUZZ_ASSERT(memchr(r->prog, 0, sizeof(r->prog)));
		FUZZ_ASSERT(r->line >= 1);
	}
}

/* Every rule's own address and ports, and a few others, in both families. */
static void check_match(const struct rsx_rules *rs, const uint8_t *data,
			size_t size)
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in s4 = { .sin_family = AF_INET };
	const struct rsx_rule *which;
	unsigned int i, k;
	int a;

	for (i = 0; i <= rs->n && i < 8; i++) {
		if (i < rs->n) {
			memcpy(&s4.sin_addr, rs->r[i].addr, 4);
			memcpy(&s6.sin6_addr, rs->r[i].addr, 16);
			s4.sin_port = s6.sin6_port = htons(rs->r[i].port_hi);
		} else if (size >= 18) {
			memcpy(&s4.sin_addr, data, 4);
			memcpy(&s6.sin6_addr, data, 16);
			memcpy(&s4.sin_port, data + 16, 2);
			s6.sin6_port = s4.sin_port;
		}
		for (k = RSX_DIR_CONNECT; k <= RSX_DIR_ACCEPT; k++) {
			a = rsx_rules_match(rs, k, (struct sockaddr *)&s4,
					    sizeof(s4), -1, &which);
			FUZZ_ASSERT(a == -1 ? !which : a >= 0 &&
				    a <= RSX_ACT_RDMA && which &&
				    which >= rs->r && which < rs->r + rs->n);
			a = rsx_rules_match(rs, k, (struct sockaddr *)&s6,
					    sizeof(s6), -1, &which);
			FUZZ_ASSERT(a == -1 ? !which : a >= 0 &&
				    a <= RSX_ACT_RDMA && which);
			/* too short for its family: the default */
			a = rsx_rules_match(rs, k, (struct sockaddr *)&s6,
					    sizeof(s4), -1, &which);
			FUZZ_ASSERT(a == -1 && !which);
		}
	}
}

static char *cstr(const uint8_t *data, size_t size, size_t *used)
{
	const uint8_t *nul = memchr(data, 0, size);
	size_t n = nul ? (size_t)(nul - data) : size;
	char *s = malloc(n + 1);

	if (!s)
		abort();
	memcpy(s, data, n);
	s[n] = 0;
	*used = nul ? n + 1 : n;
	return s;
}

static void fuzz_parse(const uint8_t *data, size_t size)
{
	char err[256] = "";
	int ret;

	memset(&rules, 0, sizeof(rules));
	ret = rsx_rules_parse(&rules, (const char *)data, size, "fuzz", err,
			      sizeof(err));
	FUZZ_ASSERT(ret == 0 || ret == -EINVAL || ret == -E2BIG);
	if (ret) {
		FUZZ_ASSERT(!strncmp(err, "fuzz:", 5));
		return;
	}
	check_rules(&rules);
	rsx_rules_bind_program(&rules, "fuzzprog");
	check_match(&rules, data, size);
}

static void check_loaded(int ret, const char *src)
{
	if (ret) {
		FUZZ_ASSERT(!conf.valid && conf.rules.n == 0);
		FUZZ_ASSERT(conf.default_action == RSX_ACT_PROBE);
		FUZZ_ASSERT(conf.error[0] && memchr(conf.error, 0,
						     sizeof(conf.error)));
		return;
	}
	FUZZ_ASSERT(conf.valid);
	FUZZ_ASSERT(conf.default_action >= RSX_ACT_TCP &&
		    conf.default_action <= RSX_ACT_RDMA);
	check_rules(&conf.rules);
	(void)src;
}

static void fuzz_env(const uint8_t *data, size_t size)
{
	char *rules_env, *def = NULL;
	size_t used, used2;
	int ret;

	rules_env = cstr(data, size, &used);
	if (used < size)
		def = cstr(data + used, size - used, &used2);
	ret = rsx_config_load(&conf, rules_env, NULL, def, "fuzzprog");
	check_loaded(ret, "RSOCKX_RULES");
	if (!ret)
		check_match(&conf.rules, data, size);
	free(def);
	free(rules_env);
}

static void fuzz_file(const uint8_t *data, size_t size)
{
	char path[64];
	int fd, ret;

	fd = memfd_create("rsockx-fuzz.conf", MFD_CLOEXEC);
	if (fd < 0)
		abort();
	if (size && write(fd, data, size) != (ssize_t)size)
		abort();
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	ret = rsx_config_load(&conf, NULL, path, NULL, "fuzzprog");
	close(fd);
	check_loaded(ret, path);
	if (!ret)
		check_match(&conf.rules, data, size);
}

static void fuzz_size(const uint8_t *data, size_t size)
{
	uint64_t v = 0, min = 4096, max = 1u << 27;
	size_t used;
	char *s = cstr(data, size, &used);
	int ret;

	ret = rsx_parse_size(s, min, max, &v);
	FUZZ_ASSERT(ret == 0 || ret == -EINVAL || ret == -ERANGE);
	if (!ret)
		FUZZ_ASSERT(v >= min && v <= max);
	ret = rsx_parse_size(s, 0, UINT64_MAX, &v);
	FUZZ_ASSERT(ret == 0 || ret == -EINVAL || ret == -ERANGE);
	free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!size)
		return 0;
	switch (data[0] & 3) {
	case 0:
		fuzz_parse(data + 1, size - 1);
		break;
	case 1:
		fuzz_env(data + 1, size - 1);
		break;
	case 2:
		fuzz_file(data + 1, size - 1);
		break;
	case 3:
		fuzz_size(data + 1, size - 1);
		break;
	}
	return 0;
}
