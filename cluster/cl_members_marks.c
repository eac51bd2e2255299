/*
 * cl_members: the drain and maintenance marks (cl_members.h "Marks"): their values, their
 * reader, and the questions placement and the healers ask of a view.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cl_members_internal.h"
#include "cl_rec.h"
#include "zc.h"

/* "<digits>" at s[0..len): 0 and *out, else -EINVAL. */
static int
parse_secs(const char *s, size_t len, int64_t *out)
{
	int64_t v = 0;

	if (!len || len > 15)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (s[i] - '0');
	}
	*out = v;
	return 0;
}

int
cl_members_mark_parse(const char *val, size_t len, bool maint, enum cl_members_mark_kind *kind,
                      int64_t *at_s)
{
	static const char drain[] = "drain ", decom[] = "decommission ";

	if (!val)
		return -EINVAL;
	if (maint) {
		*kind = CL_MEMBERS_MAINTENANCE;
		return parse_secs(val, len, at_s);
	}
	if (len > sizeof(drain) - 1 && memcmp(val, drain, sizeof(drain) - 1) == 0) {
		*kind = CL_MEMBERS_DRAIN;
		return parse_secs(val + sizeof(drain) - 1, len - (sizeof(drain) - 1), at_s);
	}
	if (len > sizeof(decom) - 1 && memcmp(val, decom, sizeof(decom) - 1) == 0) {
		*kind = CL_MEMBERS_DECOMMISSION;
		return parse_secs(val + sizeof(decom) - 1, len - (sizeof(decom) - 1), at_s);
	}
	return -EINVAL;
}

void
clm_marks_free(struct cl_members_mark *marks, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free((char *)marks[i].name);
	free(marks);
}

static int
read_one(struct cl_etcd *c, const char *prefix, int64_t rev, bool maint,
         struct cl_members_mark **out, size_t *n, size_t *cap)
{
	struct cl_etcd_range r = { .key = prefix,
		                   .key_len = strlen(prefix),
		                   .prefix = true,
		                   .revision = rev,
		                   .serializable = rev != 0 };
	struct cl_etcd_kvs kvs = { 0 };
	size_t pl = strlen(prefix);
	int rc = cl_etcd_range(c, &r, &kvs, 0);

	for (size_t i = 0; !rc && i < kvs.n; i++) {
		const struct cl_etcd_kv *kv = &kvs.kv[i];
		struct cl_members_mark mk = { 0 };
		char name[CL_REC_MAX_NAME + 1];
		size_t nl = kv->key_len - pl;

		if (kv->key_len <= pl || nl >= sizeof(name))
			continue;
		memcpy(name, kv->key + pl, nl);
		name[nl] = '\0';
		if (!cl_rec_node_name_ok(name) ||
		    cl_members_mark_parse(kv->value, kv->value_len, maint, &mk.kind, &mk.at_s))
			continue; /* not ours to judge: a mark that does not parse marks nothing */
		if (*n == *cap) {
			size_t nc = *cap ? 2 * *cap : 8;
			void *p = realloc(*out, nc * sizeof(**out));

			if (!p) {
				rc = -ENOMEM;
				break;
			}
			*out = p;
			*cap = nc;
		}
		mk.name = strdup(name);
		if (!mk.name) {
			rc = -ENOMEM;
			break;
		}
		(*out)[(*n)++] = mk;
	}
	cl_etcd_kvs_fini(&kvs);
	return rc;
}

int
clm_marks_read(struct cl_etcd *c, int64_t rev, struct cl_members_mark **out, size_t *n)
{
	size_t cap = 0;
	int rc;

	*out = NULL;
	*n = 0;
	rc = read_one(c, CL_MEMBERS_DRAIN_PREFIX, rev, false, out, n, &cap);
	if (!rc)
		rc = read_one(c, CL_MEMBERS_MAINT_PREFIX, rev, true, out, n, &cap);
	if (rc) {
		clm_marks_free(*out, *n);
		*out = NULL;
		*n = 0;
	}
	return rc;
}

const struct cl_members_mark *
cl_members_mark_of(const struct cl_members_view *v, const char *name,
                   enum cl_members_mark_kind kind)
{
	for (size_t i = 0; i < v->nmarks; i++)
		if (v->marks[i].kind == kind && strcmp(v->marks[i].name, name) == 0)
			return &v->marks[i];
	return NULL;
}

bool
cl_members_draining(const struct cl_members_view *v, const char *name)
{
	return cl_members_mark_of(v, name, CL_MEMBERS_DRAIN) ||
	       cl_members_mark_of(v, name, CL_MEMBERS_DECOMMISSION);
}

bool
cl_members_in_maintenance(const struct cl_members_view *v, const char *name)
{
	return cl_members_mark_of(v, name, CL_MEMBERS_MAINTENANCE) != NULL;
}

bool
cl_members_placeable(const struct cl_members_view *v, const char *name)
{
	for (size_t i = 0; i < v->nmarks; i++)
		if (strcmp(v->marks[i].name, name) == 0)
			return false;
	return true;
}

size_t
cl_members_ndraining(const struct cl_members_view *v)
{
	size_t n = 0;

	for (size_t i = 0; i < v->nmarks; i++)
		n += v->marks[i].kind != CL_MEMBERS_MAINTENANCE;
	return n;
}
