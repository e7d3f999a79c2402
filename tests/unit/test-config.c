// SPDX-License-Identifier: MIT
/* Rules parser and matcher: good rules, every kind of bad input, matching. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "tap.h"

static struct rsx_rules rs;
static char err[256];

static int parse(const char *text)
{
	memset(&rs, 0, sizeof(rs));
	err[0] = 0;
	return rsx_rules_parse(&rs, text, strlen(text), "test", err,
			       sizeof(err));
}

static int match4(int dir, const char *ip, int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons(port) };

	inet_pton(AF_INET, ip, &sa.sin_addr);
	return rsx_rules_match(&rs, dir, (struct sockaddr *)&sa, sizeof(sa),
			       -1, NULL);
}

static int match6(int dir, const char *ip, int port)
{
	struct sockaddr_in6 sa = { .sin6_family = AF_INET6,
				   .sin6_port = htons(port) };

	inet_pton(AF_INET6, ip, &sa.sin6_addr);
	return rsx_rules_match(&rs, dir, (struct sockaddr *)&sa, sizeof(sa),
			       -1, NULL);
}

static void test_good(void)
{
	is_int(parse(""), 0, "empty text is no rules");
	is_int(parse("# only a comment\n\n   \t\n"), 0, "comments and blanks");
	is_int(rs.n, 0, "no rules from comments");

	is_int(parse("rdma connect * 192.168.77.0/24:5000-5100\n"
		     "tcp any sshd *:22   # trailing comment\n"
		     "probe accept redis* [fd77::]/64:6379\n"
		     "rdma any * [::1]\n"
		     "tcp connect * 10.1.2.3"), 0, "five valid rules");
	is_int(rs.n, 5, "five rules stored");
	is_int(rs.r[0].action, RSX_ACT_RDMA, "action rdma");
	is_int(rs.r[0].dir, RSX_DIR_CONNECT, "direction connect");
	is_int(rs.r[0].prefix, 24, "prefix 24");
	is_int(rs.r[0].port_lo, 5000, "port range low");
	is_int(rs.r[0].port_hi, 5100, "port range high");
	is_int(rs.r[1].family, 0, "* is any family");
	is_int(rs.r[1].port_lo, 22, "single port");
	is_int(rs.r[1].port_hi, 22, "single port is a range of one");
	is_int(rs.r[2].family, AF_INET6, "bracketed IPv6");
	is_int(rs.r[2].prefix, 64, "IPv6 prefix");
	is_int(rs.r[3].prefix, 128, "IPv6 host without prefix is /128");
	is_int(rs.r[4].prefix, 32, "IPv4 host without prefix is /32");
	is_int(rs.r[4].port_hi, 65535, "no port is every port");
	is_int(rs.r[2].line, 3, "line numbers kept");

	is_int(parse("rdma connect * 1.2.3.4;tcp any * *"), 0,
	       "';' separates rules on a line");
	is_int(rs.n, 2, "two rules from one line");
	is_int(parse("tcp any * *:22 # a note; more words\nrdma any * *"), 0,
	       "';' inside a comment is comment");
	is_int(rs.n, 2, "two rules");
	is_int(rs.r[1].line, 2, "line numbers count lines, not ';'");
	is_int(parse("rdma\tconnect\t*\t1.2.3.4\r\n"), 0, "tabs and CRLF");
	is_int(parse("rdma connect * 192.168.77.99/24"), 0, "host bits");
	ok(rs.r[0].addr[3] == 0, "host bits beyond the prefix are masked");
}

static void test_bad(void)
{
	static const char *const bad[] = {
		"rdma connect *",			/* too few fields */
		"rdma connect * * extra",		/* too many */
		"fast connect * *",			/* action */
		"rdma both * *",			/* direction */
		"rdma connect * 1.2.3",			/* address */
		"rdma connect * 1.2.3.4/33",		/* prefix */
		"rdma connect * 1.2.3.4/",		/* empty prefix */
		"rdma connect * 1.2.3.4/-1",
		"rdma connect * 1.2.3.4:",		/* empty port */
		"rdma connect * 1.2.3.4:65536",		/* port range */
		"rdma connect * 1.2.3.4:99999999999999999999",
		"rdma connect * 1.2.3.4:10-5",		/* reversed range */
		"rdma connect * 1.2.3.4:5-",
		"rdma connect * 1.2.3.4:+5",
		"rdma connect * 1.2.3.4:5x",
		"rdma connect * [::1",			/* missing ] */
		"rdma connect * []",
		"rdma connect * [::1]/129",
		"rdma connect * [1.2.3.4]",		/* v4 in brackets */
		"rdma connect * ::1",			/* v6 without brackets */
		"rdma connect * *x",
		"rdma connect * *:x",
		"rdma connect * 1.2.3.4/24/8",
		"rdma connect * [::1]x",
		"rdma connect "
		"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		" *",					/* long program */
	};
	unsigned int i;

	for (i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		ok(parse(bad[i]) == -EINVAL && strstr(err, "test:1: "),
		   "rejected: %s (%s)", bad[i], err);
	}
	is_int(parse("tcp any * *\nrdma connect * 300.1.1.1\n"), -EINVAL,
	       "error on a later line");
	ok(strstr(err, "test:2: bad address") != NULL, "message names the line: %s",
	   err);
}

static void test_limits(void)
{
	char *big, *p;
	int i;

	big = malloc(RSX_RULES_MAX * 16 + 64);
	p = big;
	for (i = 0; i < RSX_RULES_MAX; i++)
		p += sprintf(p, "tcp any * *\n");
	*p = 0;
	is_int(parse(big), 0, "%d rules accepted", RSX_RULES_MAX);
	strcpy(p, "# comment after the last rule\n");
	is_int(parse(big), 0, "a comment past the limit is fine");
	strcpy(p, "tcp any * *\n");
	is_int(parse(big), -E2BIG, "one rule too many is rejected");
	free(big);

	big = malloc(RSX_LINE_MAX + 16);
	memset(big, ' ', RSX_LINE_MAX + 1);
	big[RSX_LINE_MAX + 1] = 0;
	is_int(parse(big), -EINVAL, "line longer than %d", RSX_LINE_MAX);
	big[RSX_LINE_MAX] = 0;
	is_int(parse(big), 0, "line of exactly %d", RSX_LINE_MAX);
	free(big);

	memset(&rs, 0, sizeof(rs));
	is_int(rsx_rules_parse(&rs, "tcp any * *\0rdma", 16, "test", err,
			       sizeof(err)), -EINVAL, "NUL byte rejected");
}

static void test_match(void)
{
	parse("tcp connect * 192.168.77.5:22\n"
	      "rdma connect * 192.168.77.0/24:1000-2000\n"
	      "probe accept * *:6379\n"
	      "rdma any * [fd77::]/64\n"
	      "tcp any * 10.0.0.0/8\n"
	      "probe connect * 0.0.0.0/0:80\n"
	      "rdma connect nosuchprogram *\n");
	rsx_rules_bind_program(&rs, "test-config");

	is_int(match4(RSX_DIR_CONNECT, "192.168.77.5", 22), RSX_ACT_TCP,
	       "first match wins");
	is_int(match4(RSX_DIR_CONNECT, "192.168.77.9", 1500), RSX_ACT_RDMA,
	       "prefix and port range");
	is_int(match4(RSX_DIR_CONNECT, "192.168.77.9", 2001), -1,
	       "port outside the range: default");
	is_int(match4(RSX_DIR_CONNECT, "192.168.78.9", 1500), -1,
	       "address outside the prefix: default");
	is_int(match4(RSX_DIR_ACCEPT, "1.2.3.4", 6379), RSX_ACT_PROBE,
	       "accept rule for accept");
	is_int(match4(RSX_DIR_CONNECT, "1.2.3.4", 6379), -1,
	       "accept rule not for connect");
	is_int(match6(RSX_DIR_CONNECT, "fd77::2", 9), RSX_ACT_RDMA, "IPv6 prefix");
	is_int(match6(RSX_DIR_ACCEPT, "fd78::2", 9), -1, "IPv6 outside prefix");
	is_int(match6(RSX_DIR_CONNECT, "::ffff:192.168.77.9", 1500), RSX_ACT_RDMA,
	       "IPv4-mapped IPv6 matches IPv4 rules");
	is_int(match6(RSX_DIR_CONNECT, "::ffff:10.9.9.9", 1), RSX_ACT_TCP,
	       "IPv4-mapped in 10/8");
	is_int(match4(RSX_DIR_CONNECT, "8.8.8.8", 80), RSX_ACT_PROBE,
	       "/0 matches all of IPv4");
	is_int(match6(RSX_DIR_CONNECT, "2001::1", 80), -1,
	       "IPv4 /0 does not match IPv6");
	is_int(match4(RSX_DIR_CONNECT, "8.8.8.8", 81), -1,
	       "rule of another program ignored");

	parse("rdma any test-c* *");
	rsx_rules_bind_program(&rs, "test-config");
	is_int(match4(RSX_DIR_CONNECT, "1.1.1.1", 1), RSX_ACT_RDMA,
	       "program glob matches");
	rsx_rules_bind_program(&rs, "other");
	is_int(match4(RSX_DIR_CONNECT, "1.1.1.1", 1), -1,
	       "program glob does not match another name");
}

static void test_load(void)
{
	static struct rsx_config c;
	char path[] = "/tmp/rsockx-conf-XXXXXX";
	int fd;

	is_int(rsx_config_load(&c, NULL, NULL, NULL, "x"), 0, "no config");
	ok(c.valid && c.default_action == RSX_ACT_PROBE, "default is probe");
	is_int(rsx_config_load(&c, "rdma any * *", NULL, "probe", "x"), 0,
	       "env rules and default");
	is_int(c.default_action, RSX_ACT_PROBE, "RSOCKX_DEFAULT=probe");
	is_int(rsx_config_load(&c, NULL, NULL, "fast", "x"), -EINVAL,
	       "bad RSOCKX_DEFAULT");
	ok(!c.valid && c.rules.n == 0, "invalid config has no rules");
	is_int(rsx_config_load(&c, NULL, "/nonexistent/rsockx.conf", NULL, "x"),
	       -ENOENT, "explicit missing file is an error");
	ok(strstr(c.error, "/nonexistent/rsockx.conf") != NULL, "error: %s",
	   c.error);

	fd = mkstemp(path);
	ok(write(fd, "tcp any * *:22\nrdma connect * *\n", 32) == 32,
	   "wrote a rules file");
	close(fd);
	is_int(rsx_config_load(&c, "probe any * *:80", path, NULL, "x"), 0,
	       "env rules then file");
	is_int(c.rules.n, 3, "three rules");
	is_int(c.rules.r[0].port_lo, 80, "env rules come first");
	is_int(rsx_config_load(&c, "probe any * *:80 junk", path, NULL, "x"),
	       -EINVAL, "bad env rule rejects everything");
	ok(strstr(c.error, "RSOCKX_RULES:1") != NULL, "error: %s", c.error);
	unlink(path);
}

/* RSOCKX_QP_TIMEOUT_MS -> the QP's local ACK timeout exponent */
static void test_qp_timeout(void)
{
	is_int(rsx_qp_timeout_exp(500), 14, "500 ms: 7 tries of 67 ms");
	is_int(rsx_qp_timeout_exp(1000), 15, "1 s: 7 tries of 134 ms");
	is_int(rsx_qp_timeout_exp(1), 5, "1 ms: the smallest useful");
	is_int(rsx_qp_timeout_exp(0), 5, "0 ms: as 1 ms, never 0 (no timeout)");
	is_int(rsx_qp_timeout_exp(3600000), 27, "1 h: 7 tries of ~9 min");
	is_int(rsx_qp_timeout_exp(INT_MAX), 31, "capped at 31");
	ok(RSX_QP_RETRY_CNT < 7, "retry_cnt %d is finite", RSX_QP_RETRY_CNT);
}

int main(void)
{
	test_good();
	test_bad();
	test_limits();
	test_match();
	test_load();
	test_qp_timeout();
	return done_testing();
}
