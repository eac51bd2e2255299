/* zest-admin's node commands: drain, undrain, decommission, maintenance (admin_drain.c). */
#ifndef ZEST_ADMIN_DRAIN_H
#define ZEST_ADMIN_DRAIN_H

#include <stdbool.h>
#include <stdint.h>

struct cl_etcd;

struct admin_drain_opts {
	uint64_t for_s; /* maintenance --for, seconds (0: not given) */
	bool end;       /* maintenance --end */
	bool json;
	unsigned timeout_ms;
};

/* Is cmd one of them? */
bool admin_drain_is_cmd(const char *cmd);
/* Run cmd on args[0..nargs) (one node name). Returns the exit status: 0, 1 (refused: not
 * a node of the cluster), 3 (etcd), 64 (usage). */
int admin_drain_run(struct cl_etcd *c, const char *cmd, char **args, int nargs,
                    const struct admin_drain_opts *o);
/* "30m", "90s", "2h", "1d" or plain seconds: 0 and *out, -EINVAL. */
int admin_parse_duration(const char *s, uint64_t *out);

#endif
