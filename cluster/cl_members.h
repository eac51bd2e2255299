/*
 * cl_members: the live datanodes of a cluster as one process sees them, for the gateway
 * (which coordinator, zc_place.h) and the datanodes (which peers, the live-node metric).
 * A thread reads /zest/nodes/ from etcd (one serializable Range, cl_etcd.h) every
 * refresh period and publishes the result as an immutable view; readers take a reference
 * to the current view and never wait for etcd.
 *
 * A value that does not decode as a NodeInfo (cl_rec.h) is left out of the view and
 * logged once per key and revision. When etcd cannot be read the last view stays (its
 * `revision` and `read_ns` no longer move): a node that cannot reach etcd keeps
 * serving with what it knew rather than believing everyone is gone.
 *
 * Identity (cl_members_create_opts with TLS): a registration is only a claim. A node
 * enters the view once one mutual-TLS connection to its registered address found a
 * certificate of the cluster CA naming it (rpc_tls_probe: a subjectAltName DNS entry
 * equal to the node name), checked once per (name, address, incarnation); until then,
 * and after a failed probe, it is left out of the view: no placement, coordinator
 * ranking or heal target sees it, since they all read this view. A failure is logged once
 * per incarnation, counted in the view's `unverified`, and probed again every
 * retry period. Probes run on their own thread (rpc_tls.h), never under a lock.
 *
 * Marks (cl_members_marks.c): each refresh also reads /zest/drain/<node> ("drain <unix s>"
 * or "decommission <unix s>", written by `zest-admin drain|decommission`) and
 * /zest/maintenance/<node> ("<until unix s>", under a lease of the window's length) at the
 * same revision. A marked node stays in the view (it serves reads, heals, coordinates);
 * the placement view (cl_members_get_place) leaves it out, so no new cell goes there.
 *
 * Threading: create/destroy from one thread; cl_members_get/_get_place/_view_put and
 * cl_members_refresh from any thread.
 */
#ifndef ZEST_CL_MEMBERS_H
#define ZEST_CL_MEMBERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cl_rec.h"
#include "cl_etcd.h"
#include "rpc_tls.h"

#define CL_MEMBERS_NODES_PREFIX       "/zest/nodes/"
#define CL_MEMBERS_DEFAULT_REFRESH_MS 1000
#define CL_MEMBERS_DEFAULT_PROBE_MS   5000 /* one identity probe's limit */
#define CL_MEMBERS_DEFAULT_RETRY_MS   5000 /* a failed node is probed again after this */

struct cl_members;

#define CL_MEMBERS_DRAIN_PREFIX "/zest/drain/"
#define CL_MEMBERS_MAINT_PREFIX "/zest/maintenance/"

enum cl_members_mark_kind {
	CL_MEMBERS_DRAIN = 1,        /* move every cell off; keep serving */
	CL_MEMBERS_DECOMMISSION = 2, /* drain, then leave the cluster */
	CL_MEMBERS_MAINTENANCE = 3,  /* may be absent until `at_s`: no absence heal */
};

/* One mark key: drain keys carry since when, maintenance keys until when (unix s). */
struct cl_members_mark {
	const char *name;
	enum cl_members_mark_kind kind;
	int64_t at_s;
};

/* One published membership: nodes in name order. Read-only; hold it with a reference. */
struct cl_members_view {
	const struct cl_rec_node *nodes;
	size_t n;
	const char *const *names;            /* nodes[i].name, the list zc_place ranks */
	size_t unverified;                   /* registered, left out: their identity probe failed */
	int64_t revision;                    /* etcd revision read; 0 before the first read */
	uint64_t read_ns;                    /* zc_now_ns() of that read */
	const struct cl_members_mark *marks; /* drain and maintenance keys, any node */
	size_t nmarks;
};

/*
 * Start watching membership through c (borrowed; it must outlive the view). The first
 * read happens before create returns: 0 and *out even when etcd cannot be read then (the
 * view is empty, revision 0; the thread keeps trying). refresh_ms 0: the default.
 * Returns -ENOMEM or -EAGAIN (no thread) otherwise.
 */
int cl_members_create(struct cl_etcd *c, unsigned refresh_ms, struct cl_members **out);

struct cl_members_opts {
	unsigned refresh_ms; /* 0: the default */
	/* The identity check's TLS settings (read at create; the daemon's own gRPC client
	 * files). NULL or insecure: none, every registration that decodes is live. */
	const struct rpc_tls *tls;
	unsigned probe_ms; /* 0: CL_MEMBERS_DEFAULT_PROBE_MS */
	unsigned retry_ms; /* 0: CL_MEMBERS_DEFAULT_RETRY_MS */
};

/* cl_members_create with options. With the identity check, create also waits (at most
 * probe_ms) for the first read's probes, so the first view holds the nodes that passed.
 * Returns as cl_members_create, or -EINVAL / -ENOENT ... when the TLS files cannot be
 * read (logged). */
int cl_members_create_opts(struct cl_etcd *c, const struct cl_members_opts *o,
                           struct cl_members **out);

/* Stop the thread and drop the module's reference to the current view (views still held
 * stay valid until put). NULL: no-op. */
void cl_members_destroy(struct cl_members *m);

/* Read etcd now and publish the result (the thread does this every period). Returns the
 * number of live nodes or the etcd error (the old view stays then). */
int cl_members_refresh(struct cl_members *m);

/* The current view, referenced: never NULL. Release with cl_members_view_put. */
const struct cl_members_view *cl_members_get(struct cl_members *m);

/* The placement view of the current one: its nodes without the drained, decommissioning
 * and maintenance ones (the same marks). Never NULL; release with cl_members_view_put. */
const struct cl_members_view *cl_members_get_place(struct cl_members *m);

/* The mark of kind kind on name in v, or NULL. */
const struct cl_members_mark *cl_members_mark_of(const struct cl_members_view *v, const char *name,
                                                 enum cl_members_mark_kind kind);
/* Draining: a drain or decommission mark. */
bool cl_members_draining(const struct cl_members_view *v, const char *name);
bool cl_members_in_maintenance(const struct cl_members_view *v, const char *name);
/* May a new cell go to name (no mark)? Whether it is live is the caller's question. */
bool cl_members_placeable(const struct cl_members_view *v, const char *name);
/* Nodes of v with a drain or decommission mark. */
size_t cl_members_ndraining(const struct cl_members_view *v);

/*
 * Parse a mark's value (pure): a drain key's "drain <unix s>" / "decommission <unix s>"
 * (maint false), a maintenance key's "<until unix s>" (maint true). 0 with *kind and *at_s,
 * or -EINVAL.
 */
int cl_members_mark_parse(const char *val, size_t len, bool maint, enum cl_members_mark_kind *kind,
                          int64_t *at_s);
void cl_members_view_put(const struct cl_members_view *v);

#endif
