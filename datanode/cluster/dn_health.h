/*
 * dn_health: the zest_cluster_health gauge of a datanode's /metrics (docs/operations.md
 * "Health"): cluster/cl_health.h over the keys that are cheap to read on every scrape
 * (/zest/nodes/, /zest/members/, /zest/cellcheck/, the count of /zest/heal/ and
 * /zest/locks/heal/ keys, at one etcd revision), never the records.
 *
 * Threading: the metrics thread (it blocks on etcd for at most a few Ranges' deadlines).
 */
#ifndef ZEST_DN_HEALTH_H
#define ZEST_DN_HEALTH_H

#include <stdio.h>

struct cl_etcd;

/* zest_cluster_health (0 OK, 1 WARN, 2 ERR; 1 when etcd cannot be read, and while fewer
 * than group_cells (this node's k + m) nodes are live: a group written now would put two
 * cells on one node), zest_cluster_nodes_absent and zest_cluster_nodes_checking, in
 * Prometheus text format. etcd is borrowed. */
void dn_health_metrics(struct cl_etcd *etcd, unsigned group_cells, FILE *out);

#endif
