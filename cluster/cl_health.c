/* cl_health: the pure evaluation of the cluster's health (cl_health.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_health_internal.h"
#include "zc_err.h"

enum cell_at { AT_ABSENT, AT_UNKNOWN, AT_AVAILABLE };

void
cl_health_init(struct cl_health *h)
{
	memset(h, 0, sizeof(*h));
}

void
cl_health_fini(struct cl_health *h)
{
	for (size_t i = 0; i < h->nnodes; i++) {
		free(h->nodes[i].name);
		free(h->nodes[i].zone);
	}
	free(h->nodes);
	memset(h, 0, sizeof(*h));
}

static int
cmp_node(const void *a, const void *b)
{
	return strcmp(((const struct cl_health_node *)a)->name,
	              ((const struct cl_health_node *)b)->name);
}

static void
sort_nodes(struct cl_health *h)
{
	if (!h->sorted && h->nnodes) { /* no table yet: qsort(NULL, 0) is undefined */
		qsort(h->nodes, h->nnodes, sizeof(*h->nodes), cmp_node);
		h->sorted = true;
	}
}

static struct cl_health_node *
find(struct cl_health *h, const char *name)
{
	struct cl_health_node key = { .name = (char *)name };

	if (!h->nnodes)
		return NULL;
	sort_nodes(h);
	return bsearch(&key, h->nodes, h->nnodes, sizeof(*h->nodes), cmp_node);
}

const struct cl_health_node *
cl_health_node_find(struct cl_health *h, const char *name)
{
	return find(h, name);
}

struct cl_health_node *
clh_find(struct cl_health *h, const char *name)
{
	return find(h, name);
}

int
cl_health_node_add(struct cl_health *h, const char *name, bool member, bool live, bool checked)
{
	struct cl_health_node *n;

	if (!cl_rec_node_name_ok(name))
		return -EINVAL;
	n = find(h, name);
	if (!n) {
		if (h->nnodes == h->cap) {
			size_t cap = h->cap ? 2 * h->cap : 16;
			void *p = realloc(h->nodes, cap * sizeof(*h->nodes));

			if (!p)
				return -ENOMEM;
			h->nodes = p;
			h->cap = cap;
		}
		n = &h->nodes[h->nnodes];
		memset(n, 0, sizeof(*n));
		n->name = strdup(name);
		if (!n->name)
			return -ENOMEM;
		h->nnodes++;
		h->sorted = false;
	}
	n->member |= member;
	n->live |= live;
	n->checked |= checked;
	return 0;
}

int
cl_health_node_place(struct cl_health *h, const struct cl_rec_node *ni)
{
	struct cl_health_node *n;
	uint64_t raw_free = 0;
	char *z;
	int rc = cl_health_node_add(h, ni->name, false, true, false);

	if (rc)
		return rc;
	n = find(h, ni->name);
	z = strdup(cl_rec_node_zone(ni));
	if (!n || !z) {
		free(z);
		return -ENOMEM;
	}
	free(n->zone);
	n->zone = z;
	n->weight = cl_rec_node_weight(ni);
	n->capacity_bytes = ni->capacity_bytes;
	n->free_bytes = ni->free_bytes;
	for (size_t i = 0; i < ni->ndrives; i++)
		raw_free += ni->drives[i].free_bytes;
	n->used_bytes = ni->capacity_bytes > raw_free ? ni->capacity_bytes - raw_free : 0;
	return 0;
}

/* Count the cells each node of e holds (not missing), for `zest-admin nodes`. */
static void
count_cells(struct cl_health *h, const struct cl_rec_extent *e)
{
	for (size_t i = 0; i < e->nnodes; i++) {
		struct cl_health_node *n = find(h, e->nodes[i]);

		for (size_t g = 0; n && g < e->ngroups; g++)
			for (unsigned c = 0; c < e->k + e->m; c++)
				n->cells += e->groups[g].cell[c] == i &&
				            !(e->groups[g].missing & (1u << c));
	}
}

int
cl_health_node_stop(struct cl_health *h, const char *name)
{
	struct cl_health_node *n = find(h, name);

	if (!n)
		return ZC_E(ZC_NO_KEY);
	n->stopping = true;
	return 0;
}

uint64_t
cl_health_nodes_absent(const struct cl_health *h)
{
	uint64_t n = 0;

	/* a node in a maintenance window is reported as such, not as absent */
	for (size_t i = 0; i < h->nnodes; i++)
		n += h->nodes[i].member && !h->nodes[i].live && !h->nodes[i].maint_until_s;
	return n;
}

uint64_t
cl_health_nodes_checking(const struct cl_health *h)
{
	uint64_t n = 0;

	for (size_t i = 0; i < h->nnodes; i++)
		n += h->nodes[i].live && !h->nodes[i].checked;
	return n;
}

uint64_t
cl_health_nodes_live(const struct cl_health *h)
{
	uint64_t n = 0;

	for (size_t i = 0; i < h->nnodes; i++)
		n += h->nodes[i].live;
	return n;
}

static void
note_bad(struct cl_health *h, const char *key, const char *why)
{
	if (!h->first_bad[0])
		snprintf(h->first_bad, sizeof(h->first_bad), "%s (%s)", key ? key : "?", why);
}

/* One group; returns its available cells (now and after the stops) through now and after. */
static void
eval_group(struct cl_health *h, const struct cl_rec_extent *e, const struct cl_rec_group *g,
           const unsigned char *at, const bool *stopping, unsigned *now, unsigned *after, bool *ok,
           bool *unknown)
{
	unsigned n = e->k + e->m, avail = 0, avail_after = 0;
	bool doubled = false;

	*ok = true;
	for (unsigned i = 0; i < n; i++) {
		unsigned ni = g->cell[i];

		for (unsigned j = 0; j < i; j++)
			doubled |= g->cell[j] == ni;
		if (g->missing & (1u << i)) {
			h->cells_missing++;
			*ok = false;
			continue;
		}
		switch (at[ni]) {
		case AT_AVAILABLE:
			avail++;
			avail_after += !stopping[ni];
			break;
		case AT_UNKNOWN:
			h->cells_unknown++;
			*unknown = true;
			*ok = false;
			break;
		default:
			h->cells_absent++;
			*ok = false;
		}
	}
	if (doubled) {
		h->groups_doubled++;
		*ok = false;
	}
	h->groups++;
	*now = avail;
	*after = avail_after;
}

static void
count_scheme(struct cl_health *h, unsigned k, unsigned m)
{
	for (size_t i = 0; i < h->nschemes; i++)
		if (h->schemes[i].k == k && h->schemes[i].m == m) {
			h->schemes[i].extents++;
			return;
		}
	if (h->nschemes < sizeof(h->schemes) / sizeof(h->schemes[0])) {
		h->schemes[h->nschemes].k = k;
		h->schemes[h->nschemes].m = m;
		h->schemes[h->nschemes++].extents = 1;
	}
}

bool
cl_health_scheme(const struct cl_health *h, unsigned *k, unsigned *m)
{
	size_t best = 0;

	if (!h->nschemes)
		return false;
	for (size_t i = 1; i < h->nschemes; i++)
		if (h->schemes[i].extents > h->schemes[best].extents)
			best = i;
	*k = h->schemes[best].k;
	*m = h->schemes[best].m;
	return true;
}

void
cl_health_record_add(struct cl_health *h, const char *key, const struct cl_rec_object *o)
{
	bool ok = true, unknown = false, unreadable = false, unreadable_after = false;

	h->objects++;
	h->bytes += o->size;
	for (size_t x = 0; x < o->nextents; x++) {
		const struct cl_rec_extent *e = &o->extents[x];
		unsigned char at_small[64], *at = at_small;
		bool stop_small[64], *stopping = stop_small;

		count_scheme(h, e->k, e->m);
		count_cells(h, e);
		if (e->nnodes > 64) {
			at = malloc(e->nnodes);
			stopping = malloc(e->nnodes * sizeof(*stopping));
			if (!at || !stopping) { /* unknown: never counted as OK */
				free(at != at_small ? at : NULL);
				free(stopping != stop_small ? stopping : NULL);
				cl_health_record_bad(h, key);
				h->objects--;
				return;
			}
		}
		for (size_t i = 0; i < e->nnodes; i++) {
			const struct cl_health_node *n = find(h, e->nodes[i]);

			at[i] = !n || !n->live ? AT_ABSENT : n->checked ? AT_AVAILABLE : AT_UNKNOWN;
			stopping[i] = n && n->stopping;
		}
		for (size_t gi = 0; gi < e->ngroups; gi++) {
			unsigned now, after;
			bool gok;

			eval_group(h, e, &e->groups[gi], at, stopping, &now, &after, &gok,
			           &unknown);
			ok &= gok;
			if (now < e->k) {
				h->groups_unreadable++;
				unreadable = true;
			}
			if (after < e->k) {
				h->groups_unreadable_after++;
				unreadable_after = true;
			}
		}
		if (at != at_small) {
			free(at);
			free(stopping);
		}
	}
	if (unreadable) {
		h->objects_unreadable++;
		note_bad(h, key, "fewer than k cells available");
	} else if (!ok) {
		h->objects_degraded++;
	} else {
		h->objects_ok++;
	}
	if (unknown)
		h->objects_unknown++;
	if (unreadable_after) {
		h->objects_unreadable_after++;
		if (!unreadable)
			note_bad(h, key, "fewer than k cells available after the stop");
	}
}

void
cl_health_record_bad(struct cl_health *h, const char *key)
{
	h->objects_bad++;
	note_bad(h, key, "does not decode");
}

const char *
cl_health_state_name(enum cl_health_state s)
{
	switch (s) {
	case CL_HEALTH_OK:
		return "HEALTH_OK";
	case CL_HEALTH_WARN:
		return "HEALTH_WARN";
	default:
		return "HEALTH_ERR";
	}
}

const char *
cl_health_code_name(enum cl_health_code c)
{
	static const char *const names[CL_HEALTH_NCODES] = {
		[CL_HEALTH_OBJECTS_UNREADABLE] = "objects_unreadable",
		[CL_HEALTH_NODE_ABSENT] = "node_absent",
		[CL_HEALTH_NODE_CHECKING] = "node_checking",
		[CL_HEALTH_OBJECTS_UNKNOWN] = "objects_unknown",
		[CL_HEALTH_OBJECTS_DEGRADED] = "objects_degraded",
		[CL_HEALTH_GROUPS_DOUBLED] = "groups_doubled",
		[CL_HEALTH_HEAL_PENDING] = "heal_pending",
		[CL_HEALTH_HEAL_PROGRESS] = "heal_progress",
		[CL_HEALTH_MAINTENANCE] = "maintenance",
		[CL_HEALTH_NODE_DRAINING] = "node_draining",
		[CL_HEALTH_RECORDS_BAD] = "records_bad",
	};

	return (unsigned)c < CL_HEALTH_NCODES ? names[c] : "unknown";
}

/* "dn-1, dn-2" of the nodes that pass, at most cap bytes (cut with ", ..."). */
static void
node_list(const struct cl_health *h, bool absent, char *buf, size_t cap)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < h->nnodes; i++) {
		const struct cl_health_node *n = &h->nodes[i];
		int w;

		if (absent ? !(n->member && !n->live && !n->maint_until_s)
		           : !(n->live && !n->checked))
			continue;
		w = snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", n->name);
		if (w < 0 || (size_t)w >= cap - len) {
			if (cap > 5)
				strcpy(buf + cap - 5, " ...");
			return;
		}
		len += (size_t)w;
	}
}

size_t
cl_health_reasons(const struct cl_health *h, struct cl_health_reason *out, size_t cap)
{
	size_t n = 0;
	char names[120], msg[400];
	uint64_t absent = cl_health_nodes_absent(h), checking = cl_health_nodes_checking(h);
	uint64_t maint = cl_health_nodes_maintenance(h), draining = cl_health_nodes_draining(h);
	struct cl_health_progress prog;

#define ADD(c, sev, cnt, ...)                                                          \
	do {                                                                           \
		if (n < cap) {                                                         \
			out[n].code = (c);                                             \
			out[n].severity = (sev);                                       \
			out[n].count = (cnt);                                          \
			snprintf(out[n].message, sizeof(out[n].message), __VA_ARGS__); \
		}                                                                      \
		n++;                                                                   \
	} while (0)

	if (h->objects_unreadable)
		ADD(CL_HEALTH_OBJECTS_UNREADABLE, CL_HEALTH_ERR, h->objects_unreadable,
		    "%llu objects have a group with fewer than k available cells "
		    "(%llu groups; first: %s)",
		    (unsigned long long)h->objects_unreadable,
		    (unsigned long long)h->groups_unreadable, h->first_bad);
	if (absent) {
		node_list(h, true, names, sizeof(names));
		ADD(CL_HEALTH_NODE_ABSENT, CL_HEALTH_WARN, absent,
		    "%llu nodes absent (a member with no live registration): %s",
		    (unsigned long long)absent, names);
	}
	if (maint) {
		clh_maint_msg(h, msg, sizeof(msg));
		ADD(CL_HEALTH_MAINTENANCE, CL_HEALTH_WARN, maint, "%s", msg);
	}
	if (draining) {
		clh_drain_msg(h, msg, sizeof(msg));
		ADD(CL_HEALTH_NODE_DRAINING, CL_HEALTH_WARN, draining, "%s", msg);
	}
	if (checking) {
		node_list(h, false, names, sizeof(names));
		ADD(CL_HEALTH_NODE_CHECKING, CL_HEALTH_WARN, checking,
		    "%llu nodes checking: store not yet checked against the records "
		    "(their cells count as unknown): %s",
		    (unsigned long long)checking, names);
	}
	if (h->objects_unknown)
		ADD(CL_HEALTH_OBJECTS_UNKNOWN, CL_HEALTH_WARN, h->objects_unknown,
		    "%llu objects have cells on nodes still checking (%llu cells unknown)",
		    (unsigned long long)h->objects_unknown, (unsigned long long)h->cells_unknown);
	if (h->objects_degraded)
		ADD(CL_HEALTH_OBJECTS_DEGRADED, CL_HEALTH_WARN, h->objects_degraded,
		    "%llu objects degraded: %llu cells missing, %llu on absent nodes, "
		    "%llu unknown",
		    (unsigned long long)h->objects_degraded, (unsigned long long)h->cells_missing,
		    (unsigned long long)h->cells_absent, (unsigned long long)h->cells_unknown);
	if (h->groups_doubled)
		ADD(CL_HEALTH_GROUPS_DOUBLED, CL_HEALTH_WARN, h->groups_doubled,
		    "%llu groups have two or more cells on one node",
		    (unsigned long long)h->groups_doubled);
	if (h->todo_keys)
		ADD(CL_HEALTH_HEAL_PENDING, CL_HEALTH_WARN, h->todo_keys,
		    "heal in progress: %llu objects with heal to-do keys, %llu being healed now",
		    (unsigned long long)h->todo_keys, (unsigned long long)h->heal_locks);
	cl_health_heal_progress(h, &prog);
	if (prog.cells) {
		clh_progress_msg(&prog, msg, sizeof(msg));
		ADD(CL_HEALTH_HEAL_PROGRESS, CL_HEALTH_WARN, prog.cells, "%s", msg);
	}
	if (h->objects_bad)
		ADD(CL_HEALTH_RECORDS_BAD, CL_HEALTH_WARN, h->objects_bad,
		    "%llu records could not be evaluated (first: %s)",
		    (unsigned long long)h->objects_bad, h->first_bad);
#undef ADD
	return n;
}

enum cl_health_state
cl_health_state(const struct cl_health *h)
{
	struct cl_health_reason r[CL_HEALTH_NCODES];
	size_t n = cl_health_reasons(h, r, CL_HEALTH_NCODES);
	enum cl_health_state s = CL_HEALTH_OK;

	for (size_t i = 0; i < n; i++)
		if (r[i].severity > s)
			s = r[i].severity;
	return s;
}

int
cl_health_tolerance(unsigned k, unsigned m, unsigned n)
{
	unsigned c = k + m, holders, base, extra, left, t = 0;

	if (n == 0)
		return -1;
	holders = n < c ? n : c;
	base = c / holders;
	extra = c % holders; /* this many hold base + 1 */
	left = c;
	for (unsigned i = 0; i < holders; i++) {
		unsigned cells = base + (i < extra);

		if (left - cells < k)
			break;
		left -= cells;
		t++;
	}
	return (int)t;
}
