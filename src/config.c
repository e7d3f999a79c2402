// SPDX-License-Identifier: MIT
/*
 * The rules parser.  Input comes from a file or the environment and is
 * untrusted: every field is length-checked, numbers are parsed strictly, and
 * any error rejects the whole configuration (the caller then upgrades
 * nothing) rather than silently dropping a rule that may have said "tcp".
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "libc.h"

struct rsx_config rsx_config;

#define RSX_CONF_FILE_MAX (256 * 1024)

static const char *const rsx_action_names[] = {
	[RSX_ACT_TCP] = "tcp",
	[RSX_ACT_PROBE] = "probe",
	[RSX_ACT_RDMA] = "rdma",
};

int rsx_parse_action(const char *s)
{
	unsigned int i;

	for (i = 0; i < sizeof(rsx_action_names) / sizeof(*rsx_action_names); i++)
		if (!strcmp(s, rsx_action_names[i]))
			return i;
	return -EINVAL;
}

static int rsx_parse_dir(const char *s)
{
	if (!strcmp(s, "connect"))
		return RSX_DIR_CONNECT;
	if (!strcmp(s, "accept"))
		return RSX_DIR_ACCEPT;
	if (!strcmp(s, "any"))
		return RSX_DIR_ANY;
	return -EINVAL;
}

/* Decimal number in [0, max], digits only; *end gets the first other char. */
static int rsx_parse_uint(const char *s, unsigned int max, const char **end)
{
	unsigned long v = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	while (*p >= '0' && *p <= '9') {
		v = v * 10 + (*p - '0');
		if (v > max)
			return -ERANGE;
		p++;
	}
	*end = p;
	return v;
}

/* "*", "N" or "N-M"; the whole string must be consumed. */
static int rsx_parse_ports(const char *s, struct rsx_rule *r)
{
	const char *end;
	int lo, hi;

	if (!strcmp(s, "*")) {
		r->port_lo = 0;
		r->port_hi = 65535;
		return 0;
	}
	lo = rsx_parse_uint(s, 65535, &end);
	if (lo < 0)
		return lo;
	hi = lo;
	if (*end == '-') {
		hi = rsx_parse_uint(end + 1, 65535, &end);
		if (hi < 0)
			return hi;
	}
	if (*end || hi < lo)
		return -EINVAL;
	r->port_lo = lo;
	r->port_hi = hi;
	return 0;
}

static void rsx_mask(uint8_t *addr, unsigned int alen, unsigned int prefix)
{
	unsigned int i;

	for (i = 0; i < alen; i++) {
		if (prefix >= 8)
			prefix -= 8;
		else {
			addr[i] &= (uint8_t)(0xff00 >> prefix);
			prefix = 0;
		}
	}
}

/* ADDRESS[:PORTS]: *, a.b.c.d[/len], [v6addr][/len] */
static int rsx_parse_addr(const char *tok, struct rsx_rule *r,
			  const char **why)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *p = tok, *hend, *end;
	unsigned int alen, maxbits;
	int bits;

	r->port_lo = 0;
	r->port_hi = 65535;
	if (*p == '*') {
		r->family = 0;
		r->prefix = 0;
		p++;
		goto ports;
	}
	if (*p == '[') {
		hend = strchr(p, ']');
		if (!hend) {
			*why = "missing ']' after IPv6 address";
			return -EINVAL;
		}
		p++;
		r->family = AF_INET6;
		alen = 16;
	} else {
		hend = p + strcspn(p, "/:");
		r->family = AF_INET;
		alen = 4;
	}
	if ((size_t)(hend - p) >= sizeof(host) || hend == p) {
		*why = "bad address";
		return -EINVAL;
	}
	memcpy(host, p, hend - p);
	host[hend - p] = 0;
	if (inet_pton(r->family, host, r->addr) != 1) {
		*why = "bad address";
		return -EINVAL;
	}
	p = hend + (r->family == AF_INET6);
	maxbits = alen * 8;
	r->prefix = maxbits;
	if (*p == '/') {
		bits = rsx_parse_uint(p + 1, maxbits, &end);
		if (bits < 0) {
			*why = "bad prefix length";
			return -EINVAL;
		}
		r->prefix = bits;
		p = end;
	}
	rsx_mask(r->addr, alen, r->prefix);
ports:
	if (!*p)
		return 0;
	if (*p != ':' || rsx_parse_ports(p + 1, r)) {
		*why = "bad port or port range";
		return -EINVAL;
	}
	return 0;
}

static int rsx_parse_rule(char *line, struct rsx_rule *r, const char **why)
{
	char *tok[5];
	int n = 0, v;
	char *p = line;

	while (*p) {
		while (*p == ' ' || *p == '\t' || *p == '\r')
			*p++ = 0;
		if (!*p)
			break;
		if (n == 4) {
			*why = "too many fields";
			return -EINVAL;
		}
		tok[n++] = p;
		while (*p && *p != ' ' && *p != '\t' && *p != '\r')
			p++;
	}
	if (n == 0)
		return 1;	/* blank or comment */
	if (n != 4) {
		*why = "expected: ACTION DIRECTION PROGRAM ADDRESS[:PORTS]";
		return -EINVAL;
	}
	v = rsx_parse_action(tok[0]);
	if (v < 0) {
		*why = "ACTION must be rdma, probe or tcp";
		return -EINVAL;
	}
	r->action = v;
	v = rsx_parse_dir(tok[1]);
	if (v < 0) {
		*why = "DIRECTION must be connect, accept or any";
		return -EINVAL;
	}
	r->dir = v;
	if (strlen(tok[2]) > RSX_PROG_MAX) {
		*why = "PROGRAM pattern too long";
		return -EINVAL;
	}
	strcpy(r->prog, tok[2]);
	r->prog_ok = 1;
	return rsx_parse_addr(tok[3], r, why);
}

static void rsx_seterr(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void rsx_seterr(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || !errlen)
		return;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/* One line, comment already cut: its ';'-separated rules. */
static int rsx_parse_line(struct rsx_rules *rs, char *line, const char *src,
			  unsigned int lineno, char *err, size_t errlen)
{
	const char *why;
	char *rule, *next;
	int ret;

	for (rule = line; rule; rule = next) {
		next = strchr(rule, ';');
		if (next)
			*next++ = 0;
		if (rs->n == RSX_RULES_MAX) {
			/* only an error if there is one more rule */
			if (rule[strspn(rule, " \t\r")]) {
				rsx_seterr(err, errlen, "%s:%u: more than %d rules",
					   src, lineno, RSX_RULES_MAX);
				return -E2BIG;
			}
			continue;
		}
		memset(&rs->r[rs->n], 0, sizeof(rs->r[rs->n]));
		why = "syntax error";
		ret = rsx_parse_rule(rule, &rs->r[rs->n], &why);
		if (ret < 0) {
			rsx_seterr(err, errlen, "%s:%u: %s", src, lineno, why);
			return ret;
		}
		if (ret == 0)
			rs->r[rs->n++].line = lineno;
	}
	return 0;
}

/*
 * Appends the rules in text[0..len) to rs.  '#' starts a comment that runs
 * to the end of the line; ';' separates rules within a line (so that
 * RSOCKX_RULES can hold several).  A NUL byte is an error, not an end.
 */
int rsx_rules_parse(struct rsx_rules *rs, const char *text, size_t len,
		    const char *src, char *err, size_t errlen)
{
	char line[RSX_LINE_MAX + 1];
	unsigned int lineno = 0;
	size_t i = 0, j, n;
	int ret;

	while (i < len) {
		lineno++;
		j = i;
		while (j < len && text[j] != '\n')
			j++;
		n = j - i;
		if (memchr(text + i, 0, n)) {
			rsx_seterr(err, errlen, "%s:%u: NUL byte", src, lineno);
			return -EINVAL;
		}
		if (n > RSX_LINE_MAX) {
			rsx_seterr(err, errlen, "%s:%u: line longer than %d",
				   src, lineno, RSX_LINE_MAX);
			return -EINVAL;
		}
		memcpy(line, text + i, n);
		line[n] = 0;
		i = j + 1;
		line[strcspn(line, "#")] = 0;
		ret = rsx_parse_line(rs, line, src, lineno, err, errlen);
		if (ret)
			return ret;
	}
	return 0;
}

/* PROGRAM globs are matched once, so that matching a connection stays
 * async-signal-safe (fnmatch() may allocate). */
void rsx_rules_bind_program(struct rsx_rules *rs, const char *prog)
{
	unsigned int i;

	for (i = 0; i < rs->n; i++)
		rs->r[i].prog_ok = !fnmatch(rs->r[i].prog, prog ? prog : "", 0);
}

static int rsx_prefix_eq(const uint8_t *a, const uint8_t *b,
			 unsigned int bits)
{
	unsigned int full = bits / 8, rest = bits % 8;

	if (memcmp(a, b, full))
		return 0;
	if (!rest)
		return 1;
	return !((a[full] ^ b[full]) & (uint8_t)(0xff00 >> rest));
}

/*
 * The action for a connection: dir is RSX_DIR_CONNECT (sa = the peer) or
 * RSX_DIR_ACCEPT (sa = the listener's local address).  IPv4-mapped IPv6
 * addresses match IPv4 rules.
 */
int rsx_rules_match(const struct rsx_rules *rs, int dir,
		    const struct sockaddr *sa, socklen_t salen,
		    int default_action, const struct rsx_rule **which)
{
	static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };
	const struct sockaddr_in6 *s6;
	const struct sockaddr_in *s4;
	const struct rsx_rule *r;
	const uint8_t *addr;
	unsigned int i;
	uint16_t port;
	int family;

	if (which)
		*which = NULL;
	if (sa->sa_family == AF_INET && salen >= sizeof(*s4)) {
		s4 = (const void *)sa;
		family = AF_INET;
		addr = (const uint8_t *)&s4->sin_addr;
		port = ntohs(s4->sin_port);
	} else if (sa->sa_family == AF_INET6 && salen >= sizeof(*s6)) {
		s6 = (const void *)sa;
		family = AF_INET6;
		addr = s6->sin6_addr.s6_addr;
		port = ntohs(s6->sin6_port);
		if (!memcmp(addr, v4mapped, sizeof(v4mapped))) {
			family = AF_INET;
			addr += 12;
		}
	} else {
		return default_action;
	}

	for (i = 0; i < rs->n; i++) {
		r = &rs->r[i];
		if (!r->prog_ok || !(r->dir & dir))
			continue;
		if (r->family && (r->family != family ||
				  !rsx_prefix_eq(r->addr, addr, r->prefix)))
			continue;
		if (port < r->port_lo || port > r->port_hi)
			continue;
		if (which)
			*which = r;
		return r->action;
	}
	return default_action;
}

/* A decimal number with an optional k, m or g suffix (powers of 1024). */
int rsx_parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v = 0, mul = 1;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	while (*p >= '0' && *p <= '9') {
		if (v > (UINT64_MAX - 9) / 10)
			return -ERANGE;
		v = v * 10 + (*p++ - '0');
	}
	switch (*p) {
	case 'k': case 'K': mul = 1ull << 10; p++; break;
	case 'm': case 'M': mul = 1ull << 20; p++; break;
	case 'g': case 'G': mul = 1ull << 30; p++; break;
	}
	if (*p || v > UINT64_MAX / mul)
		return -EINVAL;
	v *= mul;
	if (v < min || v > max)
		return -ERANGE;
	*out = v;
	return 0;
}

/*
 * The local ACK timeout exponent t (1 to 31) that makes RSX_QP_RETRY_CNT + 1
 * tries of 4.096 us * 2^t take about ms milliseconds: 2^t is the power of
 * two nearest to one try (t = 0 would mean no timeout at all).
 * 500 ms gives 14: 7 tries of 67 ms.
 */
uint8_t rsx_qp_timeout_exp(int ms)
{
	/* one try, in units of 4.096 us */
	uint64_t x = (uint64_t)(ms > 0 ? ms : 1) * 1000000 /
		     (4096 * (RSX_QP_RETRY_CNT + 1));
	uint8_t t = 1;

	while (t < 31 && x >= 3ull << (t - 1))	/* 1.5 * 2^t */
		t++;
	return t;
}

static int rsx_read_file(const char *path, char *buf, size_t size,
			 size_t *len)
{
	size_t off = 0;
	ssize_t n;
	int fd;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (;;) {
		n = rsx_libc.read(fd, buf + off, size - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		off += n;
		if (off == size) {
			rsx_libc.close(fd);
			return -EFBIG;
		}
	}
	rsx_libc.close(fd);
	if (n < 0)
		return -EIO;
	*len = off;
	return 0;
}

/*
 * conf_path == NULL: no file.  A missing file is fine only at the default
 * path (conf_required == 0); a file named by RSOCKX_CONF must exist.
 */
static int rsx_config_load_file(struct rsx_config *c, const char *path,
				int required)
{
	static char buf[RSX_CONF_FILE_MAX];
	size_t len = 0;
	int ret;

	ret = rsx_read_file(path, buf, sizeof(buf), &len);
	if (ret == -ENOENT && !required)
		return 0;
	if (ret) {
		rsx_seterr(c->error, sizeof(c->error), "%s: %s", path,
			   ret == -EFBIG ? "file too large" : strerror(-ret));
		return ret;
	}
	return rsx_rules_parse(&c->rules, buf, len, path, c->error,
			       sizeof(c->error));
}

int rsx_config_load(struct rsx_config *c, const char *rules_env,
		    const char *conf_path, const char *default_env,
		    const char *prog)
{
	int ret = 0, v;

	c->valid = 1;
	c->error[0] = 0;
	c->rules.n = 0;
	c->default_action = RSX_ACT_PROBE;

	if (default_env) {
		v = rsx_parse_action(default_env);
		if (v < 0) {
			rsx_seterr(c->error, sizeof(c->error),
				   "RSOCKX_DEFAULT: must be rdma, probe or tcp");
			ret = -EINVAL;
			goto err;
		}
		c->default_action = v;
	}
	if (rules_env) {
		ret = rsx_rules_parse(&c->rules, rules_env, strlen(rules_env),
				      "RSOCKX_RULES", c->error,
				      sizeof(c->error));
		if (ret)
			goto err;
	}
	if (conf_path && *conf_path) {
		ret = rsx_config_load_file(c, conf_path, strcmp(conf_path,
						SYSCONFDIR "/rsockx.conf"));
		if (ret)
			goto err;
	}
	rsx_rules_bind_program(&c->rules, prog);
	return 0;

err:
	c->valid = 0;
	c->rules.n = 0;
	c->default_action = RSX_ACT_PROBE;
	return ret;
}
