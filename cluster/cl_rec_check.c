/* cl_rec_check: the rules a cluster record must keep (cl_rec.h), shared by the
 * encoders (a process never writes what another would refuse) and the decoders. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cl_rec.h"
#include "cl_rec_internal.h"

int
cl_rec_why(char *why, size_t cap, const char *fmt, ...)
{
	va_list ap;

	if (why && cap) {
		va_start(ap, fmt);
		vsnprintf(why, cap, fmt, ap);
		va_end(ap);
	}
	return -1;
}

bool
cl_rec_node_name_ok(const char *name)
{
	size_t n = name ? strlen(name) : 0;

	if (n == 0 || n > CL_REC_MAX_NAME || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = name[i];

		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '.' || c == '_' || c == '-'))
			return false;
	}
	return true;
}

size_t
cl_rec_extent_groups(const struct cl_rec_extent *e)
{
	uint64_t per = (uint64_t)e->k * e->cell_size * e->stripes_per_group;

	if (per == 0)
		return 0;
	return (size_t)(e->size / per + (e->size % per != 0));
}

static bool
empty(const char *s)
{
	return !s || !*s;
}

/* host:port with a port in 1..65535 (the host is for the resolver to judge). */
static bool
address_ok(const char *a)
{
	const char *colon = a ? strrchr(a, ':') : NULL;
	unsigned long port = 0;

	if (!colon || colon == a || !colon[1] || strlen(colon + 1) > 5)
		return false;
	for (const char *p = colon + 1; *p; p++) {
		if (*p < '0' || *p > '9')
			return false;
		port = port * 10 + (unsigned long)(*p - '0');
	}
	return port >= 1 && port <= 65535;
}

int
cl_rec_check_node(const struct cl_rec_node *v, char *why, size_t cap)
{
	if (!cl_rec_node_name_ok(v->name))
		return cl_rec_why(why, cap, "NodeInfo.name \"%.64s\" is not a node name",
		                  v->name ? v->name : "");
	if (!address_ok(v->address))
		return cl_rec_why(why, cap, "NodeInfo.address \"%.64s\" is not host:port",
		                  v->address ? v->address : "");
	if (v->incarnation == 0)
		return cl_rec_why(why, cap, "NodeInfo.incarnation is 0");
	if (v->state != CL_REC_NODE_UP && v->state != CL_REC_NODE_DRAINING)
		return cl_rec_why(why, cap, "NodeInfo.state %d is not UP or DRAINING",
		                  (int)v->state);
	for (size_t i = 0; i < v->ndrives; i++)
		if (empty(v->drives[i].id))
			return cl_rec_why(why, cap, "NodeInfo.drives[%zu].id is empty", i);
	if (!empty(v->zone) && !cl_rec_node_name_ok(v->zone))
		return cl_rec_why(why, cap, "NodeInfo.zone \"%.64s\" is not a zone name", v->zone);
	return 0;
}

int
cl_rec_check_member(const struct cl_rec_member *v, char *why, size_t cap)
{
	if (!cl_rec_node_name_ok(v->name))
		return cl_rec_why(why, cap, "MemberInfo.name \"%.64s\" is not a node name",
		                  v->name ? v->name : "");
	if (!address_ok(v->address))
		return cl_rec_why(why, cap, "MemberInfo.address \"%.64s\" is not host:port",
		                  v->address ? v->address : "");
	if (v->incarnation == 0)
		return cl_rec_why(why, cap, "MemberInfo.incarnation is 0");
	for (size_t i = 0; i < v->ndrive_ids; i++)
		if (empty(v->drive_ids[i]))
			return cl_rec_why(why, cap, "MemberInfo.drive_ids[%zu] is empty", i);
	return 0;
}

static int
check_attrs(const char *what, const struct cl_rec_attr *a, size_t n, char *why, size_t cap)
{
	for (size_t i = 0; i < n; i++)
		if (empty(a[i].name))
			return cl_rec_why(why, cap, "%s.attrs[%zu].name is empty", what, i);
	return 0;
}

/* what: "ObjectRecord.extents[3]" and the like, for the message. */
static int
check_extent(const char *what, const struct cl_rec_extent *e, char *why, size_t cap)
{
	unsigned w = e->k + e->m;

	if (e->id == 0)
		return cl_rec_why(why, cap, "%s.id is 0", what);
	if (e->k == 0 || e->k > CL_REC_MAX_CELLS || e->m > CL_REC_MAX_CELLS || w > CL_REC_MAX_CELLS)
		return cl_rec_why(why, cap, "%s: scheme %u+%u is not 1 <= k, k+m <= %d", what, e->k,
		                  e->m, CL_REC_MAX_CELLS);
	if (e->cell_size == 0 || e->cell_size % 4096 || e->cell_size > (1ull << 30))
		return cl_rec_why(why, cap,
		                  "%s.cell_size %llu is not a multiple of 4096 in (0, 1 GiB]", what,
		                  (unsigned long long)e->cell_size);
	if (e->stripes_per_group == 0 || e->stripes_per_group > (1u << 20))
		return cl_rec_why(why, cap, "%s.stripes_per_group %u is not in 1..1048576", what,
		                  e->stripes_per_group);
	if (e->ngroups != cl_rec_extent_groups(e))
		return cl_rec_why(why, cap, "%s has %zu groups, its size %llu needs %zu", what,
		                  e->ngroups, (unsigned long long)e->size, cl_rec_extent_groups(e));
	if (e->ngroups && e->nnodes == 0)
		return cl_rec_why(why, cap, "%s has groups but no nodes", what);
	if (e->nnodes > CL_REC_MAX_EXTENT_NODES)
		return cl_rec_why(why, cap, "%s names %zu nodes, more than %d", what, e->nnodes,
		                  CL_REC_MAX_EXTENT_NODES);
	for (size_t i = 0; i < e->nnodes; i++) {
		if (!cl_rec_node_name_ok(e->nodes[i]))
			return cl_rec_why(why, cap, "%s.nodes[%zu] \"%.64s\" is not a node name",
			                  what, i, e->nodes[i] ? e->nodes[i] : "");
		/* quadratic, over at most CL_REC_MAX_EXTENT_NODES names */
		for (size_t j = 0; j < i; j++)
			if (strcmp(e->nodes[i], e->nodes[j]) == 0)
				return cl_rec_why(why, cap,
				                  "%s.nodes[%zu] repeats nodes[%zu] \"%s\"", what,
				                  i, j, e->nodes[i]);
	}
	for (size_t g = 0; g < e->ngroups; g++) {
		const struct cl_rec_group *gr = &e->groups[g];

		if (w < 32 && gr->missing >> w)
			return cl_rec_why(why, cap,
			                  "%s.groups[%zu].missing 0x%x has bits past cell %u", what,
			                  g, gr->missing, w - 1);
		for (unsigned c = 0; c < w; c++)
			if (gr->cell[c] >= e->nnodes)
				return cl_rec_why(
				        why, cap,
				        "%s.groups[%zu].cells[%u] = %u, past its %zu nodes", what,
				        g, c, gr->cell[c], e->nnodes);
	}
	return 0;
}

int
cl_rec_check_object(const struct cl_rec_object *v, char *why, size_t cap)
{
	uint64_t sum = 0;
	char what[48];

	if (empty(v->etag))
		return cl_rec_why(why, cap, "ObjectRecord.etag is empty");
	if (check_attrs("ObjectRecord", v->attrs, v->nattrs, why, cap))
		return -1;
	for (size_t i = 0; i < v->nextents; i++) {
		snprintf(what, sizeof(what), "ObjectRecord.extents[%zu]", i);
		if (check_extent(what, &v->extents[i], why, cap))
			return -1;
		if (sum + v->extents[i].size < sum)
			return cl_rec_why(why, cap, "ObjectRecord: extent sizes overflow");
		sum += v->extents[i].size;
	}
	if (sum != v->size)
		return cl_rec_why(why, cap, "ObjectRecord.size %llu, its extents hold %llu",
		                  (unsigned long long)v->size, (unsigned long long)sum);
	/* the Txn that replaces the record deletes this key: never one outside the moved
	 * keys (a bucket's, a record's) */
	if (!empty(v->moved) && (strncmp(v->moved, "/zest/moved/", 12) != 0 ||
	                         strlen(v->moved) < 15 || v->moved[strlen(v->moved) - 1] != '/'))
		return cl_rec_why(why, cap, "ObjectRecord.moved \"%.64s\" is not a moved key",
		                  v->moved);
	return 0;
}
