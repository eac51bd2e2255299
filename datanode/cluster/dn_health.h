/*
 * dn_health: the zest_cluster_health gauge of a datanode's /metrics (docs/operations.md
 * "Health"): cluster/cl_health.h over the keys that are cheap to read (/zest/nodes/,
 * /zest/members/, /zest/cellcheck/, the counts of /zest/heal/ and /zest/locks/heal/ keys,
 * at one etcd revision), never the records. Read at a scrape, at most once per
 * DN_HEALTH_REUSE_MS: scrapes closer together get the last result, so a client polling
 * /metrics fast costs etcd five Ranges a second per node at most.
 *
 * Threading: the metrics thread only (it blocks on etcd for at most a few Ranges'
 * deadlines). The struct is the caller's, zeroed before the first call.
 */
#ifndef ZEST_DN_HEALTH_H
#define ZEST_DN_HEALTH_H

#include <stdint.h>
#include <stdio.h>

#define DN_HEALTH_REUSE_MS 1000

struct cl_etcd;

struct dn_health {
	uint64_t read_ns; /* zc_now_ns() of the last read; 0: none */
	int state;
	unsigned long long absent, checking;
};

/* zest_cluster_health (0 OK, 1 WARN, 2 ERR; 1 when etcd cannot be read, and while fewer
 * than group_cells (this node's k + m) nodes are live: a group written now would put two
 * cells on one node), zest_cluster_nodes_absent and zest_cluster_nodes_checking, in
 * Prometheus text format. etcd is borrowed. */
void dn_health_metrics(struct dn_health *d, struct cl_etcd *etcd, unsigned group_cells, FILE *out);

#endif
