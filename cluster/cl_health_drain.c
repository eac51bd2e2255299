/* cl_health: drains, maintenance windows and heal progress (cl_health.h), pure. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cl_health_internal.h"
#include "cl_members.h"

static struct cl_health_node *
get(struct cl_health *h, const char *name)
{
	if (cl_health_node_add(h, name, false, false, false))
		return NULL;
	return clh_find(h, name);
}

int
cl_health_node_mark(struct cl_health *h, const char *name, int kind, int64_t at_s)
{
	struct cl_health_node *n;

	if (!cl_rec_node_name_ok(name))
		return -EINVAL;
	n = get(h, name);
	if (!n)
		return -ENOMEM;
	if (kind == CL_MEMBERS_MAINTENANCE) {
		n->maint_until_s = at_s;
	} else if (kind == CL_MEMBERS_DRAIN || kind == CL_MEMBERS_DECOMMISSION) {
		n->drain = kind;
		n->drain_since_s = at_s;
	} else {
		return -EINVAL;
	}
	return 0;
}

int
cl_health_node_stat(struct cl_health *h, const char *name, const struct cl_healstat *s)
{
	struct cl_health_node *n;

	if (!cl_rec_node_name_ok(name))
		return -EINVAL;
	n = get(h, name);
	if (!n)
		return -ENOMEM;
	n->stat = *s;
	n->has_stat = true;
	return 0;
}

uint64_t
cl_health_nodes_draining(const struct cl_health *h)
{
	uint64_t n = 0;

	for (size_t i = 0; i < h->nnodes; i++)
		n += h->nodes[i].drain != 0;
	return n;
}

uint64_t
cl_health_nodes_maintenance(const struct cl_health *h)
{
	uint64_t n = 0;

	for (size_t i = 0; i < h->nnodes; i++)
		n += h->nodes[i].maint_until_s != 0;
	return n;
}

void
cl_health_heal_progress(const struct cl_health *h, struct cl_health_progress *p)
{
	memset(p, 0, sizeof(*p));
	for (size_t i = 0; i < h->nnodes; i++) {
		const struct cl_health_node *n = &h->nodes[i];

		/* a dead healer's key goes with its lease; one left over counts only while live */
		if (!n->has_stat || !n->live)
			continue;
		p->known = true;
		p->cells += n->stat.pending_cells;
		p->bytes += n->stat.pending_bytes;
		p->rate += cl_healstat_rate(&n->stat);
	}
	p->eta_s = cl_healstat_eta(p->cells, p->rate);
}

void
cl_health_drain_progress(const struct cl_health *h, const struct cl_health_node *n,
                         struct cl_health_progress *p)
{
	struct cl_health_progress all;

	memset(p, 0, sizeof(*p));
	p->eta_s = -1;
	/* only a count whose pass began under this very key (a node counts its cells at
	 * start too, before any drain: that count is no drain's progress) */
	if (!n->has_stat || n->stat.own_cells < 0 || n->stat.own_drain_s != n->drain_since_s)
		return;
	p->known = true;
	p->cells = (uint64_t)n->stat.own_cells;
	p->bytes = n->stat.own_bytes > 0 ? (uint64_t)n->stat.own_bytes : 0;
	p->rate = cl_healstat_own_rate(&n->stat);
	if (p->rate <= 0) { /* one count so far: the healers' moves are the drain's */
		cl_health_heal_progress(h, &all);
		p->rate = all.rate;
	}
	p->eta_s = cl_healstat_eta(p->cells, p->rate);
}

/* "123 s" / "unknown" */
static void
eta_str(int64_t eta, char *buf, size_t cap)
{
	if (eta < 0)
		snprintf(buf, cap, "unknown");
	else
		snprintf(buf, cap, "%" PRId64 " s", eta);
}

void
clh_progress_msg(const struct cl_health_progress *p, char *buf, size_t cap)
{
	char eta[32];

	eta_str(p->eta_s, eta, sizeof(eta));
	snprintf(buf, cap,
	         "heal in progress: %" PRIu64 " cells (%" PRIu64 " bytes) left, rate %.1f "
	         "cells/s, ETA %s",
	         p->cells, p->bytes, p->rate, eta);
}

/* Append to buf at *len, cut with " ..." when full. */
static void
append(char *buf, size_t cap, size_t *len, const char *fmt_s)
{
	size_t l = strlen(fmt_s);

	if (*len + l + 1 > cap) {
		if (cap > 5 && *len + 5 <= cap)
			strcpy(buf + (*len < cap - 5 ? *len : cap - 5), " ...");
		*len = cap;
		return;
	}
	memcpy(buf + *len, fmt_s, l + 1);
	*len += l;
}

void
clh_maint_msg(const struct cl_health *h, char *buf, size_t cap)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < h->nnodes && len < cap; i++) {
		const struct cl_health_node *n = &h->nodes[i];
		char one[200], when[40];
		time_t t = (time_t)n->maint_until_s;
		struct tm tm;

		if (!n->maint_until_s)
			continue;
		gmtime_r(&t, &tm);
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		snprintf(one, sizeof(one), "%smaintenance: %s until %s (%s)", len ? "; " : "",
		         n->name, when, n->live ? "live" : "absent, no rebuild for it");
		append(buf, cap, &len, one);
	}
}

void
clh_drain_msg(const struct cl_health *h, char *buf, size_t cap)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < h->nnodes && len < cap; i++) {
		const struct cl_health_node *n = &h->nodes[i];
		const char *what =
		        n->drain == CL_MEMBERS_DECOMMISSION ? "decommissioning" : "draining";
		struct cl_health_progress p;
		char one[240], eta[32];

		if (!n->drain)
			continue;
		cl_health_drain_progress(h, n, &p);
		eta_str(p.eta_s, eta, sizeof(eta));
		if (!p.known)
			snprintf(one, sizeof(one), "%s%s %s: cells left not counted yet",
			         len ? "; " : "", what, n->name);
		else if (!p.cells)
			snprintf(one, sizeof(one), "%s%s %s: no cell left%s", len ? "; " : "", what,
			         n->name,
			         n->drain == CL_MEMBERS_DECOMMISSION
			                 ? ", leaving"
			                 : " (undrain or decommission)");
		else
			snprintf(one, sizeof(one),
			         "%s%s %s: %" PRIu64 " cells (%" PRIu64 " bytes) left, rate %.1f "
			         "cells/s, ETA %s",
			         len ? "; " : "", what, n->name, p.cells, p.bytes, p.rate, eta);
		append(buf, cap, &len, one);
	}
}
