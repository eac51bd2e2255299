/*
 * cl_health: the cluster's health state (docs/operations.md "Health"), computed the same way
 * by `zest-admin status` / `ok-to-stop` (over every record) and by each datanode's
 * zest_cluster_health gauge (over the small keys only).
 *
 * The evaluation (cl_health_node_add, cl_health_record_add, cl_health_reasons) is pure: it
 * is fed nodes and records and counts. A cell is AVAILABLE only when its missing bit is
 * clear and its node is live and checked (/zest/cellcheck/<node> names the store id the
 * node registered); a cell on a live node not yet checked is UNKNOWN, never available; a
 * cell on a node that is not live is ABSENT. HEALTH_OK only when every group of every
 * record has k + m available cells on k + m distinct nodes and nothing else is pending;
 * HEALTH_ERR when some group has fewer than k available cells.
 *
 * Drains, maintenance windows and heal progress (/zest/drain/, /zest/maintenance/,
 * /zest/healstat/, cl_members.h and cl_healstat.h) are WARN reasons of their own: a
 * node in maintenance is reported as such, not as absent; a draining node keeps the
 * state WARN until its key goes; the healers' progress gives cells left, a rate and an
 * estimate.
 *
 * The readers (cl_health_read_keys, cl_health_read_records) fill a cl_health from etcd at
 * one revision, so every key read belongs to the same moment.
 *
 * Threading: a struct cl_health belongs to its caller's thread. Ownership: names passed in
 * are copied; cl_health_fini frees everything.
 */
#ifndef ZEST_CL_HEALTH_H
#define ZEST_CL_HEALTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cl_rec.h"
#include "cl_healstat.h"

struct cl_etcd;

#define CL_HEALTH_CELLCHECK "/zest/cellcheck/"
#define CL_HEALTH_MEMBERS   "/zest/members/"
#define CL_HEALTH_LOCKS     "/zest/locks/heal/"
#define CL_HEALTH_PAGE      256 /* records per Range */

enum cl_health_state {
	CL_HEALTH_OK = 0,
	CL_HEALTH_WARN = 1,
	CL_HEALTH_ERR = 2,
};

/* Reasons, in the order they are reported. Their names (cl_health_code_name) are the
 * stable `code` strings of `zest-admin status --json`. */
enum cl_health_code {
	CL_HEALTH_OBJECTS_UNREADABLE, /* ERR: objects with a group of fewer than k available */
	CL_HEALTH_NODE_ABSENT,        /* members with no live /zest/nodes/ key */
	CL_HEALTH_MAINTENANCE,        /* nodes in a maintenance window (absent or not) */
	CL_HEALTH_NODE_DRAINING,      /* nodes with a drain or decommission key */
	CL_HEALTH_NODE_CHECKING,      /* live nodes whose store is not checked yet */
	CL_HEALTH_OBJECTS_UNKNOWN,    /* objects with cells on a node not checked yet */
	CL_HEALTH_OBJECTS_DEGRADED,   /* objects with a group short of k + m available */
	CL_HEALTH_GROUPS_DOUBLED,     /* groups with two cells on one node */
	CL_HEALTH_HEAL_PENDING,       /* to-do keys /zest/heal/ */
	CL_HEALTH_HEAL_PROGRESS,      /* the healers' progress keys: cells left to heal or move */
	CL_HEALTH_RECORDS_BAD,        /* records that do not decode */
	CL_HEALTH_NCODES
};

struct cl_health_node {
	char *name;
	bool member;   /* /zest/members/<name> exists */
	bool live;     /* /zest/nodes/<name> exists */
	bool checked;  /* live, and /zest/cellcheck/<name> is its store id */
	bool stopping; /* ok-to-stop: counted as not live in the *_after counts */
	/* from its registration (cl_health_node_place), live nodes only */
	char *zone;              /* cl_rec_node_zone */
	uint64_t weight;         /* cl_rec_node_weight: its share of new cells */
	uint64_t capacity_bytes; /* over its drives */
	uint64_t used_bytes;     /* capacity less the drives' free space */
	uint64_t free_bytes;     /* above the reserve: what placement may still use */
	uint64_t cells;          /* cells the records added place on it, not missing */
	int drain;     /* 0, CL_MEMBERS_DRAIN or CL_MEMBERS_DECOMMISSION (cl_members.h) */
	int64_t drain_since_s, maint_until_s; /* 0: no such key */
	bool has_stat;                        /* /zest/healstat/<name> read into stat */
	struct cl_healstat stat;
};

/* Cells (and bytes) left, a rate in cells/s (0: not known yet) and an estimate in seconds
 * (-1: not known). */
struct cl_health_progress {
	uint64_t cells, bytes;
	double rate;
	int64_t eta_s;
	bool known; /* some progress key counted */
};

struct cl_health {
	struct cl_health_node *nodes; /* sorted by name once records are added */
	size_t nnodes, cap;
	bool sorted;
	int64_t revision; /* the etcd revision everything was read at (0: not from etcd) */

	uint64_t todo_keys;  /* /zest/heal/ keys */
	uint64_t heal_locks; /* /zest/locks/heal/ keys: objects being healed right now */

	uint64_t objects;            /* records added */
	uint64_t objects_ok;         /* every group: k + m available, node-distinct */
	uint64_t objects_unreadable; /* some group with fewer than k available */
	uint64_t objects_unknown;    /* some cell on a live node not checked yet */
	uint64_t objects_degraded;   /* readable, not ok (missing, absent, unknown, doubled) */
	uint64_t objects_bad;        /* records that did not decode */
	uint64_t groups, groups_doubled, groups_unreadable;
	uint64_t cells_missing, cells_absent, cells_unknown;
	uint64_t bytes;
	/* with the stopping nodes gone too (ok-to-stop) */
	uint64_t objects_unreadable_after, groups_unreadable_after;
	struct {
		unsigned k, m;
		uint64_t extents;
	} schemes[8]; /* the first 8 schemes the extents use, for cl_health_scheme */
	size_t nschemes;
	/* the first unreadable object (after stopping, if none now), for messages */
	char first_bad[160];
};

struct cl_health_reason {
	enum cl_health_code code;
	enum cl_health_state severity;
	uint64_t count;
	char message[400];
};

void cl_health_init(struct cl_health *h);
void cl_health_fini(struct cl_health *h);

/* Add what is known of node name (merged with an earlier entry of that name: each flag
 * is or-ed in). Returns 0, -EINVAL (not a node name) or -ENOMEM. */
int cl_health_node_add(struct cl_health *h, const char *name, bool member, bool live, bool checked);

/* Record a live node's zone, weight and space from its registration (copied; the node is
 * added live if not known yet). Returns 0, -EINVAL or -ENOMEM. */
int cl_health_node_place(struct cl_health *h, const struct cl_rec_node *ni);

/*
 * The failure domains over the live nodes (cl_health_zones.c): *zones gets how many
 * zones hold live nodes with room, and the result is how many whole zones a RS(k, m)
 * group placed now (zc_place_spread) may lose with k cells left; -1 when no group can be
 * placed (no live node with room). stopping nodes count as gone when after is set.
 */
int cl_health_zone_tolerance(const struct cl_health *h, unsigned k, unsigned m, bool after,
                             unsigned *zones);
/* A drain (kind CL_MEMBERS_DRAIN / _DECOMMISSION, since at_s) or maintenance (until at_s)
 * key of name; the node is added when unknown. 0, -EINVAL or -ENOMEM. */
int cl_health_node_mark(struct cl_health *h, const char *name, int kind, int64_t at_s);
/* name's healer progress key. 0, -EINVAL or -ENOMEM. */
int cl_health_node_stat(struct cl_health *h, const char *name, const struct cl_healstat *s);

/* The healers' progress over every progress key (pure). */
void cl_health_heal_progress(const struct cl_health *h, struct cl_health_progress *p);
/* A draining node's: cells records name on it by its own last count (known false when it
 * counted none), its own rate, else the healers' overall one. */
void cl_health_drain_progress(const struct cl_health *h, const struct cl_health_node *n,
                              struct cl_health_progress *p);
uint64_t cl_health_nodes_draining(const struct cl_health *h);
uint64_t cl_health_nodes_maintenance(const struct cl_health *h);

/* Mark name as about to stop (ok-to-stop). Returns 0, or ZC_E(ZC_NO_KEY) when name is
 * neither a member nor live. */
int cl_health_node_stop(struct cl_health *h, const char *name);

/* The node entry of name, or NULL. */
const struct cl_health_node *cl_health_node_find(struct cl_health *h, const char *name);

/* Evaluate one decoded record (named key, for messages; may be NULL) against the nodes
 * added so far (add every node first). */
void cl_health_record_add(struct cl_health *h, const char *key, const struct cl_rec_object *o);

/* A record value that does not decode: unknown, so never OK. */
void cl_health_record_bad(struct cl_health *h, const char *key);

/* The scheme most extents added so far use: false when none was added. */
bool cl_health_scheme(const struct cl_health *h, unsigned *k, unsigned *m);

/* How many members are absent / live nodes checking. */
uint64_t cl_health_nodes_absent(const struct cl_health *h);
uint64_t cl_health_nodes_checking(const struct cl_health *h);
uint64_t cl_health_nodes_live(const struct cl_health *h);

/*
 * The reasons the state is not OK, worst first, into out (cap entries); returns how many
 * there are (may exceed cap). When no record was added (the datanode's gauge) only the
 * nodes and the to-do keys count.
 */
size_t cl_health_reasons(const struct cl_health *h, struct cl_health_reason *out, size_t cap);

/* The state: the worst severity of the reasons, CL_HEALTH_OK when there is none. */
enum cl_health_state cl_health_state(const struct cl_health *h);

const char *cl_health_state_name(enum cl_health_state s); /* "HEALTH_OK", ... */
const char *cl_health_code_name(enum cl_health_code c);   /* "node_absent", ... */

/*
 * The node losses a group placed now over n live nodes survives with every cell durable
 * (docs/cluster.md "The write quorum": cells dealt in rounds of n node-distinct slots),
 * -1 when n == 0. A new write is taken while this is >= write_quorum - k.
 */
int cl_health_tolerance(unsigned k, unsigned m, unsigned n);

/*
 * Read, at one revision (the first Range's, linearizable; the rest serializable at it),
 * /zest/nodes/, /zest/members/ (keys), /zest/cellcheck/, the count of /zest/heal/ and of
 * /zest/locks/heal/ keys, the drain, maintenance and progress keys into h (h->revision
 * set). Returns 0 or the etcd error.
 */
int cl_health_read_keys(struct cl_etcd *c, struct cl_health *h, unsigned timeout_ms);

/*
 * Page through every /zest/objects/ record at h->revision, CL_HEALTH_PAGE per serializable
 * Range, evaluating each (cl_health_record_add / _bad). *ranges (may be NULL) gets the
 * Ranges sent. Returns 0 or the etcd error (-ERANGE: the revision was compacted meanwhile;
 * read again).
 */
int cl_health_read_records(struct cl_etcd *c, struct cl_health *h, unsigned timeout_ms,
                           uint64_t *ranges);

#endif
