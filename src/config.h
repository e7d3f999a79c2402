/* SPDX-License-Identifier: MIT */
#ifndef RSX_CONFIG_H
#define RSX_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/*
 * Which connections may be upgraded: rules from RSOCKX_RULES and the rules
 * file (rsockx.conf(5)), first match wins, RSOCKX_DEFAULT when none does.
 *
 *     ACTION  DIRECTION  PROGRAM  ADDRESS[:PORTS]
 *     rdma    connect    *        192.168.77.0/24:5000-5100
 *     tcp     any        sshd     *:22
 *     probe   accept     redis*   [fd77::]/64:6379
 */
enum rsx_action {
	RSX_ACT_TCP = 0,	/* never upgrade */
	RSX_ACT_PROBE,		/* ask the peer whether it runs rsockx */
	RSX_ACT_RDMA,		/* the peer runs rsockx: negotiate at once */
	RSX_ACT_OOB,		/* (no rule says it) TCP, counted, upgraded
				   out of band once the probe says yes */
};

enum rsx_dir {
	RSX_DIR_CONNECT = 1,
	RSX_DIR_ACCEPT = 2,
	RSX_DIR_ANY = RSX_DIR_CONNECT | RSX_DIR_ACCEPT,
};

#define RSX_RULES_MAX	256
#define RSX_LINE_MAX	1023
#define RSX_PROG_MAX	63

struct rsx_rule {
	uint8_t action;
	uint8_t dir;
	uint8_t family;		/* 0: any address, AF_INET, AF_INET6 */
	uint8_t prefix;		/* significant bits of addr */
	uint8_t prog_ok;	/* PROGRAM matched this process's name */
	uint8_t addr[16];
	uint16_t port_lo;
	uint16_t port_hi;
	unsigned int line;
	char prog[RSX_PROG_MAX + 1];
};

struct rsx_rules {
	unsigned int n;
	struct rsx_rule r[RSX_RULES_MAX];
};

struct rsx_config {
	int disabled;		/* RSOCKX_DISABLE: track nothing */
	int valid;		/* 0 after any configuration error */
	int default_action;
	uint32_t ring_size;	/* RSOCKX_RING_SIZE: our receive ring */
	uint32_t spin_us;	/* RSOCKX_SPIN_US: poll this long before sleeping */
	int wrap_handlers;	/* RSOCKX_WRAP_HANDLERS: count handlers (sig.h) */
	int linger_ms;		/* RSOCKX_LINGER_MS: close() waits this long */
	int hello_wait_ms;	/* a message's start waits this long for its rest */
	int hello_grace_ms;	/* a server speaking first waits for a HELLO */
	int probe_timeout_ms;	/* RSOCKX_PROBE_TIMEOUT_MS: no answer = no */
	int probe_ttl_s;	/* RSOCKX_PROBE_TTL_S: "rsockx here" is kept */
	int probe_neg_ttl_s;	/* RSOCKX_PROBE_NEG_TTL_S: "no" is kept */
	int qp_timeout_ms;	/* RSOCKX_QP_TIMEOUT_MS: unanswered QP fails */
	uint8_t qp_timeout;	/* its local ACK timeout exponent (qa.timeout) */
	uint32_t max_qps;	/* RSOCKX_MAX_QPS: held at once, 0: no limit */
	uint64_t pin_max;	/* RSOCKX_PIN_MAX: pool bytes pinned, 0: no cap */
	int pin_max_default;	/* not set: rsx_pin_max() works it out */
	int tclass;		/* RSOCKX_TCLASS: GRH traffic class (DSCP, ECN) */
	int sl;			/* RSOCKX_SL: service level (priority) */
	int oob;		/* RSOCKX_OOB: upgrades out of band (oob.h) */
	int inband;		/* RSOCKX_INBAND: HELLO on TCP when known safe */
	int oob_window_ms;	/* RSOCKX_OOB_WINDOW_MS: accepted, may upgrade */
	int oob_timeout_ms;	/* RSOCKX_OOB_TIMEOUT_MS: a request's answer */
	int local;		/* RSOCKX_LOCAL: same-host over shared memory */
	uint32_t test_qp_err_after; /* RSOCKX_TEST_QP_ERR_AFTER: test hook */
	int test_probe_yes;	/* RSOCKX_TEST_PROBE_YES: test hook */
	int cut_wait_ms;	/* RSX_CUT_WAIT_MS, or RSOCKX_TEST_CUT_WAIT_MS */
	int test_fork_gap_ms;	/* RSOCKX_TEST_FORK_GAP_MS: test hook */
	int test_exit_gap_ms;	/* RSOCKX_TEST_EXIT_GAP_MS: test hook */
	int test_answer_hold_ms; /* RSOCKX_TEST_ANSWER_HOLD_MS: test hook */
	int test_exec_gap_ms;	/* RSOCKX_TEST_EXEC_GAP_MS: test hook */
	int test_oob_again;	/* RSOCKX_TEST_OOB_AGAIN: test hook */
	struct rsx_rules rules;
	char error[256];	/* first error, "source:line: reason" */
};

extern struct rsx_config rsx_config;

int rsx_parse_action(const char *s);
int rsx_rules_parse(struct rsx_rules *rs, const char *text, size_t len,
		    const char *src, char *err, size_t errlen);
void rsx_rules_bind_program(struct rsx_rules *rs, const char *prog);
int rsx_rules_match(const struct rsx_rules *rs, int dir,
		    const struct sockaddr *sa, socklen_t salen,
		    int default_action, const struct rsx_rule **which);
int rsx_parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *out);

/*
 * A queue pair whose packets go unanswered (dead link, a peer that named a
 * QP that does not exist) fails after RSX_QP_RETRY_CNT + 1 tries of
 * 4.096 us * 2^timeout each.  Not 7: Soft-RoCE (and the spec for rnr_retry)
 * read 7 as "retry for ever".
 */
#define RSX_QP_RETRY_CNT	6
uint8_t rsx_qp_timeout_exp(int ms);
int rsx_config_load(struct rsx_config *c, const char *rules_env,
		    const char *conf_path, const char *default_env,
		    const char *prog);

/* RSOCKX_PIN_MAX, or its default, worked out at the first pool chunk. */
uint64_t rsx_pin_max(void);

#endif
