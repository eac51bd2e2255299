/* The healers' to-do keys (cl_meta.h, "heal to-do keys"): names and values. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cl_meta_internal.h"

int
cl_meta_heal_key(const char *record_key, size_t record_len, char *buf, size_t cap)
{
	size_t pl = strlen(CL_META_OBJECTS), hl = strlen(CL_META_HEAL);

	if (!record_key || record_len <= pl || memcmp(record_key, CL_META_OBJECTS, pl) != 0)
		return -EINVAL;
	if (hl + record_len - pl + 1 > cap)
		return -ENAMETOOLONG;
	memcpy(buf, CL_META_HEAL, hl);
	memcpy(buf + hl, record_key + pl, record_len - pl);
	buf[hl + record_len - pl] = '\0';
	return (int)(hl + record_len - pl);
}

size_t
cl_meta_heal_value_add(char *buf, size_t len, uint64_t id)
{
	/* a full list keeps its first ids: the record key is what a healer reads first */
	if (len + 17 > CL_META_HEAL_VALUE_CAP)
		return len;
	len += (size_t)snprintf(buf + len, 18, "%s%016llx", len ? "," : "", (unsigned long long)id);
	return len;
}

bool
cl_meta_heal_group_doubled(const struct cl_rec_extent *e, const struct cl_rec_group *gr)
{
	unsigned w = e->k + e->m;

	/* the node table holds distinct names (cl_rec.h), so an index repeated is a node */
	for (unsigned c = 1; c < w && c < CL_REC_MAX_CELLS; c++)
		for (unsigned d = 0; d < c; d++)
			if (gr->cell[c] == gr->cell[d])
				return true;
	return false;
}

size_t
cl_meta_heal_value(const struct cl_rec_object *rec, char *buf)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t x = 0; x < rec->nextents; x++) {
		const struct cl_rec_extent *e = &rec->extents[x];

		for (size_t g = 0; g < e->ngroups; g++)
			if (e->groups[g].missing || cl_meta_heal_group_doubled(e, &e->groups[g])) {
				len = cl_meta_heal_value_add(buf, len, e->id);
				break;
			}
	}
	return len;
}

/* Two cells of the put's group on one node (by name: a put has no node table yet). */
static bool
put_group_doubled(const struct cl_meta_extent *e, const struct cl_meta_group *gr)
{
	unsigned w = e->k + e->m;

	for (unsigned c = 1; c < w && c < CL_REC_MAX_CELLS; c++)
		for (unsigned d = 0; d < c; d++)
			if (gr->node[c] && gr->node[d] && strcmp(gr->node[c], gr->node[d]) == 0)
				return true;
	return false;
}

size_t
cl_meta_heal_value_put(const struct cl_meta_put *p, char *buf)
{
	size_t len = 0;

	buf[0] = '\0';
	for (size_t x = 0; x < p->nextents; x++) {
		const struct cl_meta_extent *e = &p->extents[x];

		for (size_t g = 0; g < e->ngroups; g++)
			if (e->groups[g].missing || put_group_doubled(e, &e->groups[g])) {
				len = cl_meta_heal_value_add(buf, len, e->id);
				break;
			}
	}
	return len;
}

size_t
cl_meta_heal_ids(const void *value, size_t len, uint64_t *ids, size_t cap)
{
	const char *p = value, *end = p + len;
	size_t n = 0;

	while (p < end && n < cap) {
		uint64_t id = 0;
		unsigned digits = 0;
		bool bad = false;

		for (; p < end && *p != ','; p++, digits++) {
			int c = *p, d = c >= '0' && c <= '9'   ? c - '0'
			                : c >= 'a' && c <= 'f' ? c - 'a' + 10
			                                       : -1;

			bad |= d < 0;
			id = id << 4 | (uint64_t)(d < 0 ? 0 : d);
		}
		if (!bad && digits == 16 && id)
			ids[n++] = id;
		if (p < end)
			p++; /* the comma */
	}
	return n;
}
