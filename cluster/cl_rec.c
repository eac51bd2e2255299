/* cl_rec: cluster records between zest's structs and cluster/cluster.proto (cl_rec.h).
 * Encoding builds a protobuf-c tree that borrows the caller's strings (its arrays come from
 * an arena freed after packing); decoding unpacks, copies into zest's structs and checks
 * the record's rules on the copy. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cluster.pb-c.h"
#include "cl_rec.h"
#include "cl_rec_internal.h"

/* ---------------------------------------------------------------- arena (encoding) */

struct arena {
	void **p;
	size_t n, cap;
	bool oom;
};

static void *
aalloc(struct arena *a, size_t n, size_t size)
{
	void *v;

	if (a->oom)
		return NULL;
	if (a->n == a->cap) {
		size_t cap = a->cap ? 2 * a->cap : 16;
		void **p = realloc(a->p, cap * sizeof(*p));

		if (!p) {
			a->oom = true;
			return NULL;
		}
		a->p = p;
		a->cap = cap;
	}
	v = calloc(n ? n : 1, size);
	if (!v) {
		a->oom = true;
		return NULL;
	}
	a->p[a->n++] = v;
	return v;
}

static void
afree(struct arena *a)
{
	for (size_t i = 0; i < a->n; i++)
		free(a->p[i]);
	free(a->p);
}

/* protobuf-c packs from char *; it only reads them. */
static char *
s(const char *v)
{
	return (char *)(v ? v : "");
}

static int
pack(const ProtobufCMessage *m, uint8_t **buf, size_t *len)
{
	size_t n = protobuf_c_message_get_packed_size(m);

	*buf = malloc(n ? n : 1);
	if (!*buf)
		return -ENOMEM;
	*len = protobuf_c_message_pack(m, *buf);
	return 0;
}

static Zest__Cluster__Attr **
enc_attrs(struct arena *a, const struct cl_rec_attr *v, size_t n)
{
	Zest__Cluster__Attr *pa = aalloc(a, n, sizeof(*pa));
	Zest__Cluster__Attr **pp = aalloc(a, n, sizeof(*pp));

	if (!pa || !pp)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		zest__cluster__attr__init(&pa[i]);
		pa[i].name = s(v[i].name);
		pa[i].value = s(v[i].value);
		pp[i] = &pa[i];
	}
	return pp;
}

static Zest__Cluster__Extent *
enc_extent(struct arena *a, const struct cl_rec_extent *e)
{
	Zest__Cluster__Extent *pe = aalloc(a, 1, sizeof(*pe));
	Zest__Cluster__Group *pg = aalloc(a, e->ngroups, sizeof(*pg));
	Zest__Cluster__Group **gp = aalloc(a, e->ngroups, sizeof(*gp));
	uint32_t *cells = aalloc(a, e->ngroups * (e->k + e->m), sizeof(*cells));
	char **nodes = aalloc(a, e->nnodes, sizeof(*nodes));
	unsigned w = e->k + e->m;

	if (!pe || !pg || !gp || !cells || !nodes)
		return NULL;
	zest__cluster__extent__init(pe);
	pe->id = e->id;
	pe->size = e->size;
	pe->k = e->k;
	pe->m = e->m;
	pe->cell_size = e->cell_size;
	pe->stripes_per_group = e->stripes_per_group;
	for (size_t i = 0; i < e->nnodes; i++)
		nodes[i] = s(e->nodes[i]);
	pe->n_nodes = e->nnodes;
	pe->nodes = nodes;
	for (size_t g = 0; g < e->ngroups; g++) {
		zest__cluster__group__init(&pg[g]);
		for (unsigned c = 0; c < w; c++)
			cells[g * w + c] = e->groups[g].cell[c];
		pg[g].n_cells = w;
		pg[g].cells = &cells[g * w];
		pg[g].missing = e->groups[g].missing;
		gp[g] = &pg[g];
	}
	pe->n_groups = e->ngroups;
	pe->groups = gp;
	return pe;
}

/* ---------------------------------------------------------------- copying (decoding) */

static char *
dup(const char *v, bool *oom)
{
	char *d = strdup(v ? v : "");

	if (!d)
		*oom = true;
	return d;
}

static void *
zalloc(size_t n, size_t size, bool *oom)
{
	void *v = calloc(n ? n : 1, size);

	if (!v)
		*oom = true;
	return v;
}

static void
free_strv(char **v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i]);
	free(v);
}

static void
attrs_fini(struct cl_rec_attr *a, size_t n)
{
	for (size_t i = 0; a && i < n; i++) {
		free(a[i].name);
		free(a[i].value);
	}
	free(a);
}

static void
extent_fini(struct cl_rec_extent *e)
{
	free_strv(e->nodes, e->nnodes);
	free(e->groups);
	memset(e, 0, sizeof(*e));
}

static struct cl_rec_attr *
dec_attrs(Zest__Cluster__Attr **pa, size_t n, bool *oom)
{
	struct cl_rec_attr *a = zalloc(n, sizeof(*a), oom);

	for (size_t i = 0; a && i < n; i++) {
		a[i].name = dup(pa[i]->name, oom);
		a[i].value = dup(pa[i]->value, oom);
	}
	return a;
}

/* Checks what the struct cannot hold (k + m cells per group, 16-bit indices) before the
 * rules see the copy. Returns 0, -1 (why set) or sets *oom. */
static int
dec_extent(const char *what, const Zest__Cluster__Extent *pe, struct cl_rec_extent *e, bool *oom,
           char *why, size_t cap)
{
	uint64_t w;

	memset(e, 0, sizeof(*e));
	if (!pe)
		return cl_rec_why(why, cap, "%s is missing", what);
	w = (uint64_t)pe->k + pe->m;
	if (pe->k == 0 || w > CL_REC_MAX_CELLS)
		return cl_rec_why(why, cap, "%s: scheme %u+%u is not 1 <= k, k+m <= %d", what,
		                  pe->k, pe->m, CL_REC_MAX_CELLS);
	if (pe->n_nodes > CL_REC_MAX_EXTENT_NODES)
		return cl_rec_why(why, cap, "%s names %zu nodes, more than %d", what, pe->n_nodes,
		                  CL_REC_MAX_EXTENT_NODES);
	e->id = pe->id;
	e->size = pe->size;
	e->k = pe->k;
	e->m = pe->m;
	e->cell_size = pe->cell_size;
	e->stripes_per_group = pe->stripes_per_group;
	e->nodes = zalloc(pe->n_nodes, sizeof(*e->nodes), oom);
	e->groups = zalloc(pe->n_groups, sizeof(*e->groups), oom);
	if (*oom)
		return 0;
	e->nnodes = pe->n_nodes;
	for (size_t i = 0; i < pe->n_nodes; i++)
		e->nodes[i] = dup(pe->nodes[i], oom);
	e->ngroups = pe->n_groups;
	for (size_t g = 0; g < pe->n_groups; g++) {
		const Zest__Cluster__Group *pg = pe->groups[g];

		if (pg->n_cells != w)
			return cl_rec_why(why, cap, "%s.groups[%zu] has %zu cells, not k+m = %u",
			                  what, g, pg->n_cells, (unsigned)w);
		for (size_t c = 0; c < w; c++) {
			if (pg->cells[c] >= pe->n_nodes)
				return cl_rec_why(
				        why, cap,
				        "%s.groups[%zu].cells[%zu] = %u, past its %zu nodes", what,
				        g, c, pg->cells[c], pe->n_nodes);
			e->groups[g].cell[c] = (uint16_t)pg->cells[c];
		}
		e->groups[g].missing = pg->missing;
	}
	return 0;
}

/* The end of every decoder: a missing allocation or a broken rule (why already says which). */
static int
dec_end(int rule, bool oom)
{
	if (oom)
		return -ENOMEM;
	return rule ? -EBADMSG : 0;
}

static int
not_a(const char *type, char *why, size_t cap)
{
	cl_rec_why(why, cap, "%s: not protobuf wire format", type);
	return -EBADMSG;
}

/* ---------------------------------------------------------------- NodeInfo */

int
cl_rec_node_encode(const struct cl_rec_node *v, uint8_t **buf, size_t *len, char *why, size_t cap)
{
	Zest__Cluster__NodeInfo pb = ZEST__CLUSTER__NODE_INFO__INIT;
	struct arena a = { 0 };
	Zest__Cluster__Drive *pd;
	Zest__Cluster__Drive **pp;
	int rc;

	if (cl_rec_check_node(v, why, cap))
		return -EINVAL;
	pd = aalloc(&a, v->ndrives, sizeof(*pd));
	pp = aalloc(&a, v->ndrives, sizeof(*pp));
	if (!pd || !pp) {
		afree(&a);
		return -ENOMEM;
	}
	for (size_t i = 0; i < v->ndrives; i++) {
		zest__cluster__drive__init(&pd[i]);
		pd[i].index = v->drives[i].index;
		pd[i].id = s(v->drives[i].id);
		pd[i].capacity_bytes = v->drives[i].capacity_bytes;
		pd[i].free_bytes = v->drives[i].free_bytes;
		pd[i].failed = v->drives[i].failed;
		pp[i] = &pd[i];
	}
	pb.name = s(v->name);
	pb.address = s(v->address);
	pb.incarnation = v->incarnation;
	pb.state = (Zest__Cluster__NodeState)v->state;
	pb.n_drives = v->ndrives;
	pb.drives = pp;
	pb.capacity_bytes = v->capacity_bytes;
	pb.free_bytes = v->free_bytes;
	pb.started_ns = v->started_ns;
	pb.version = s(v->version);
	pb.zone = s(v->zone);
	rc = pack(&pb.base, buf, len);
	afree(&a);
	return rc;
}

int
cl_rec_node_decode(const void *buf, size_t len, struct cl_rec_node *out, char *why, size_t cap)
{
	Zest__Cluster__NodeInfo *pb;
	bool oom = false;
	int rule = 0, rc;

	memset(out, 0, sizeof(*out));
	pb = zest__cluster__node_info__unpack(NULL, len, buf);
	if (!pb)
		return not_a("NodeInfo", why, cap);
	out->name = dup(pb->name, &oom);
	out->address = dup(pb->address, &oom);
	out->incarnation = pb->incarnation;
	out->state = (enum cl_rec_node_state)pb->state;
	out->capacity_bytes = pb->capacity_bytes;
	out->free_bytes = pb->free_bytes;
	out->started_ns = pb->started_ns;
	out->version = dup(pb->version, &oom);
	out->zone = dup(pb->zone, &oom);
	out->drives = zalloc(pb->n_drives, sizeof(*out->drives), &oom);
	if (out->drives) {
		out->ndrives = pb->n_drives;
		for (size_t i = 0; i < pb->n_drives; i++) {
			out->drives[i].index = pb->drives[i]->index;
			out->drives[i].id = dup(pb->drives[i]->id, &oom);
			out->drives[i].capacity_bytes = pb->drives[i]->capacity_bytes;
			out->drives[i].free_bytes = pb->drives[i]->free_bytes;
			out->drives[i].failed = pb->drives[i]->failed;
		}
	}
	zest__cluster__node_info__free_unpacked(pb, NULL);
	if (!oom)
		rule = cl_rec_check_node(out, why, cap);
	rc = dec_end(rule, oom);
	if (rc)
		cl_rec_node_fini(out);
	return rc;
}

const char *
cl_rec_node_zone(const struct cl_rec_node *v)
{
	return v->zone && v->zone[0] ? v->zone : v->name;
}

uint64_t
cl_rec_node_weight(const struct cl_rec_node *v)
{
	return v->capacity_bytes ? v->free_bytes : CL_REC_WEIGHT_UNKNOWN;
}

void
cl_rec_node_fini(struct cl_rec_node *v)
{
	free(v->name);
	free(v->address);
	free(v->version);
	free(v->zone);
	for (size_t i = 0; v->drives && i < v->ndrives; i++)
		free(v->drives[i].id);
	free(v->drives);
	memset(v, 0, sizeof(*v));
}

/* ---------------------------------------------------------------- MemberInfo */

int
cl_rec_member_encode(const struct cl_rec_member *v, uint8_t **buf, size_t *len, char *why,
                     size_t cap)
{
	Zest__Cluster__MemberInfo pb = ZEST__CLUSTER__MEMBER_INFO__INIT;
	struct arena a = { 0 };
	char **ids;
	int rc;

	if (cl_rec_check_member(v, why, cap))
		return -EINVAL;
	ids = aalloc(&a, v->ndrive_ids, sizeof(*ids));
	if (!ids) {
		afree(&a);
		return -ENOMEM;
	}
	for (size_t i = 0; i < v->ndrive_ids; i++)
		ids[i] = s(v->drive_ids[i]);
	pb.name = s(v->name);
	pb.address = s(v->address);
	pb.first_seen_ns = v->first_seen_ns;
	pb.last_seen_ns = v->last_seen_ns;
	pb.incarnation = v->incarnation;
	pb.n_drive_ids = v->ndrive_ids;
	pb.drive_ids = ids;
	rc = pack(&pb.base, buf, len);
	afree(&a);
	return rc;
}

int
cl_rec_member_decode(const void *buf, size_t len, struct cl_rec_member *out, char *why, size_t cap)
{
	Zest__Cluster__MemberInfo *pb;
	bool oom = false;
	int rule = 0, rc;

	memset(out, 0, sizeof(*out));
	pb = zest__cluster__member_info__unpack(NULL, len, buf);
	if (!pb)
		return not_a("MemberInfo", why, cap);
	out->name = dup(pb->name, &oom);
	out->address = dup(pb->address, &oom);
	out->first_seen_ns = pb->first_seen_ns;
	out->last_seen_ns = pb->last_seen_ns;
	out->incarnation = pb->incarnation;
	out->drive_ids = zalloc(pb->n_drive_ids, sizeof(*out->drive_ids), &oom);
	if (out->drive_ids) {
		out->ndrive_ids = pb->n_drive_ids;
		for (size_t i = 0; i < pb->n_drive_ids; i++)
			out->drive_ids[i] = dup(pb->drive_ids[i], &oom);
	}
	zest__cluster__member_info__free_unpacked(pb, NULL);
	if (!oom)
		rule = cl_rec_check_member(out, why, cap);
	rc = dec_end(rule, oom);
	if (rc)
		cl_rec_member_fini(out);
	return rc;
}

void
cl_rec_member_fini(struct cl_rec_member *v)
{
	free(v->name);
	free(v->address);
	free_strv(v->drive_ids, v->ndrive_ids);
	memset(v, 0, sizeof(*v));
}

/* ---------------------------------------------------------------- BucketRecord */

int
cl_rec_bucket_encode(const struct cl_rec_bucket *v, uint8_t **buf, size_t *len, char *why,
                     size_t cap)
{
	Zest__Cluster__BucketRecord pb = ZEST__CLUSTER__BUCKET_RECORD__INIT;

	(void)why;
	(void)cap;
	pb.ctime_ns = v->ctime_ns;
	return pack(&pb.base, buf, len);
}

int
cl_rec_bucket_decode(const void *buf, size_t len, struct cl_rec_bucket *out, char *why, size_t cap)
{
	Zest__Cluster__BucketRecord *pb;

	memset(out, 0, sizeof(*out));
	pb = zest__cluster__bucket_record__unpack(NULL, len, buf);
	if (!pb)
		return not_a("BucketRecord", why, cap);
	out->ctime_ns = pb->ctime_ns;
	zest__cluster__bucket_record__free_unpacked(pb, NULL);
	return 0;
}

/* ---------------------------------------------------------------- ObjectRecord */

int
cl_rec_object_encode(const struct cl_rec_object *v, uint8_t **buf, size_t *len, char *why,
                     size_t cap)
{
	Zest__Cluster__ObjectRecord pb = ZEST__CLUSTER__OBJECT_RECORD__INIT;
	struct arena a = { 0 };
	Zest__Cluster__Extent **ep;
	int rc = -ENOMEM;

	if (cl_rec_check_object(v, why, cap))
		return -EINVAL;
	pb.size = v->size;
	pb.etag = s(v->etag);
	pb.crc32c = v->crc32c;
	pb.mtime_ns = v->mtime_ns;
	pb.n_attrs = v->nattrs;
	pb.attrs = enc_attrs(&a, v->attrs, v->nattrs);
	ep = aalloc(&a, v->nextents, sizeof(*ep));
	for (size_t i = 0; ep && i < v->nextents; i++)
		ep[i] = enc_extent(&a, &v->extents[i]);
	pb.n_extents = v->nextents;
	pb.extents = ep;
	pb.moved = s(v->moved);
	if (!a.oom)
		rc = pack(&pb.base, buf, len);
	afree(&a);
	return rc;
}

int
cl_rec_object_decode(const void *buf, size_t len, struct cl_rec_object *out, char *why, size_t cap)
{
	Zest__Cluster__ObjectRecord *pb;
	bool oom = false;
	int rule = 0, rc;
	char what[48];

	memset(out, 0, sizeof(*out));
	pb = zest__cluster__object_record__unpack(NULL, len, buf);
	if (!pb)
		return not_a("ObjectRecord", why, cap);
	out->size = pb->size;
	out->etag = dup(pb->etag, &oom);
	out->crc32c = pb->crc32c;
	out->mtime_ns = pb->mtime_ns;
	out->attrs = dec_attrs(pb->attrs, pb->n_attrs, &oom);
	if (out->attrs)
		out->nattrs = pb->n_attrs;
	out->extents = zalloc(pb->n_extents, sizeof(*out->extents), &oom);
	if (out->extents)
		out->nextents = pb->n_extents;
	for (size_t i = 0; out->extents && i < pb->n_extents && !rule && !oom; i++) {
		snprintf(what, sizeof(what), "ObjectRecord.extents[%zu]", i);
		rule = dec_extent(what, pb->extents[i], &out->extents[i], &oom, why, cap);
	}
	if (pb->moved && pb->moved[0])
		out->moved = dup(pb->moved, &oom);
	zest__cluster__object_record__free_unpacked(pb, NULL);
	if (!oom && !rule)
		rule = cl_rec_check_object(out, why, cap);
	rc = dec_end(rule, oom);
	if (rc)
		cl_rec_object_fini(out);
	return rc;
}

void
cl_rec_object_fini(struct cl_rec_object *v)
{
	free(v->etag);
	attrs_fini(v->attrs, v->nattrs);
	for (size_t i = 0; v->extents && i < v->nextents; i++)
		extent_fini(&v->extents[i]);
	free(v->extents);
	free(v->moved);
	memset(v, 0, sizeof(*v));
}
