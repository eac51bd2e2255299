/*
 * dn_cluster: a datanode's membership in a cluster (docs/cluster.md), part of the daemon
 * (not the engine). With --cluster it registers /zest/nodes/<name> (NodeInfo, under a
 * lease kept alive from a thread of the etcd client) and /zest/members/<name>
 * (MemberInfo, no lease), registers again when the lease is lost, revokes the lease at a
 * clean stop (the node key goes at once), and keeps a membership view for the metrics.
 *
 * Start-up fails rather than waits when etcd cannot be reached: the operator sees the
 * misconfiguration at once and a supervisor restarts the daemon. After start an etcd
 * outage only makes the node absent until it registers again; it keeps serving.
 *
 * Threading: start/leave/destroy from the main thread; dn_cluster_metrics from the
 * metrics thread.
 */
#ifndef ZEST_DN_CLUSTER_H
#define ZEST_DN_CLUSTER_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define DN_CLUSTER_TTL_S 10 /* the node lease; keepalive every third of it */

struct dn_cluster;
struct cl_etcd;

struct dn_cluster_opts {
	const char *endpoints;     /* --cluster: etcd host:port[,...] */
	const char *node;          /* --node: the node name (cl_rec_node_name_ok) */
	const char *zone;          /* --zone: failure domain (the same rule); NULL: its own */
	uint64_t reserve;          /* --reserve: bytes per drive placement leaves free */
	const char *address;       /* host:port gateways and peers dial */
	const char *const *drives; /* --drive folders, in order; borrowed until destroy */
	unsigned ndrives;
	unsigned ttl_s; /* 0: DN_CLUSTER_TTL_S */
	unsigned group_cells; /* k + m of --ec: fewer live nodes make zest_cluster_health 1 */
	/* the store's metadata is empty (new, or every copy lost while the drives' identity
	 * files stayed): /zest/cellcheck/<node> is deleted before the node registers, so no
	 * reader counts its store as checked once it is live (the healer checks it) */
	bool store_fresh;
	/* TLS to etcd when the endpoints are https:// (the daemon passes its --tls-* files;
	 * NULL: the system's CAs, no client certificate) */
	const char *ca_file, *cert_file, *key_file;
};

/*
 * Connect, register and start keeping the registration. o's strings are copied (the
 * drives list is borrowed until dn_cluster_destroy; the TLS files are read at start). A key of this
 * name held by another process (another incarnation under a live lease) is waited out for one TTL
 * (a crashed predecessor's lease expiring), then refused. Returns 0 and *out, -EEXIST
 * (the name is taken), -EINVAL (bad options), or the etcd error (cl_etcd.h); the reason
 * is logged.
 */
int dn_cluster_start(const struct dn_cluster_opts *o, struct dn_cluster **out);

/* Leave: stop registering and revoke the lease, so /zest/nodes/<name> goes now rather
 * than after the TTL (/zest/members/<name> stays). The metrics still answer. Main thread;
 * a second call and NULL are no-ops. */
void dn_cluster_leave(struct dn_cluster *c);

/* Decommissioned (the healer found no cell named here): the keeper stops renewing the
 * registration, gives its lease up and never registers again. Any thread, never blocks. */
void dn_cluster_retire(struct dn_cluster *c);

/* Leave if not yet done, stop the membership view, close the etcd client and free c.
 * Only once nothing calls dn_cluster_metrics any more. NULL: no-op. */
void dn_cluster_destroy(struct dn_cluster *c);

/* The cluster's etcd client (for the collector, dn_cgc.h): valid until destroy. */
struct cl_etcd *dn_cluster_etcd(struct dn_cluster *c);
/* The membership view (for the coordinator, dn_coord.h, and the healer, dn_cheal.h):
 * valid until destroy. */
struct cl_members *dn_cluster_members(struct dn_cluster *c);

/* zest_cluster_live_nodes, zest_cluster_registered and zest_cluster_registrations_total,
 * in Prometheus text format (the metrics thread). */
void dn_cluster_metrics(struct dn_cluster *c, FILE *out);

#endif
