/* cl_health: reading the health's inputs from etcd at one revision (cl_health.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cl_health.h"
#include "cl_etcd.h"
#include "cl_members.h"
#include "cl_meta.h"
#include "cl_rec.h"
#include "zc.h"

/* The store id a NodeInfo registered: its drives' "<store>/<index>" ids' store, written
 * into buf (cap bytes); false when it names none or drives disagree. */
static bool
store_of(const struct cl_rec_node *ni, char *buf, size_t cap)
{
	size_t len = 0;

	for (size_t i = 0; i < ni->ndrives; i++) {
		const char *id = ni->drives[i].id, *slash = id ? strchr(id, '/') : NULL;
		size_t l = slash ? (size_t)(slash - id) : 0;

		if (!l || l >= cap)
			return false;
		if (i == 0) {
			memcpy(buf, id, l);
			buf[l] = '\0';
			len = l;
		} else if (l != len || memcmp(buf, id, l) != 0) {
			return false;
		}
	}
	return len > 0 && strcmp(buf, "unknown") != 0;
}

static int
read_prefix(struct cl_etcd *c, const char *prefix, int64_t rev, bool keys_only, int64_t limit,
            struct cl_etcd_kvs *out, unsigned timeout_ms)
{
	struct cl_etcd_range r = { .key = prefix,
		                   .key_len = strlen(prefix),
		                   .prefix = true,
		                   .limit = limit,
		                   .revision = rev,
		                   .serializable = rev != 0,
		                   .keys_only = keys_only };

	return cl_etcd_range(c, &r, out, timeout_ms);
}

/* The value of cellcheck/<name> among kvs, or NULL. */
static const struct cl_etcd_kv *
check_of(const struct cl_etcd_kvs *kvs, const char *name)
{
	size_t pl = strlen(CL_HEALTH_CELLCHECK);

	for (size_t i = 0; i < kvs->n; i++)
		if (kvs->kv[i].key_len > pl && strcmp(kvs->kv[i].key + pl, name) == 0)
			return &kvs->kv[i];
	return NULL;
}

/* The drain, maintenance and progress keys at h->revision. A value that does not parse
 * marks nothing (and is no progress). */
static int
read_marks(struct cl_etcd *c, struct cl_health *h, unsigned timeout_ms)
{
	static const char *const prefixes[] = { CL_MEMBERS_DRAIN_PREFIX, CL_MEMBERS_MAINT_PREFIX,
		                                CL_HEALSTAT_PREFIX };
	int rc = 0;

	for (size_t p = 0; !rc && p < 3; p++) {
		struct cl_etcd_kvs kvs = { 0 };
		size_t pl = strlen(prefixes[p]);

		rc = read_prefix(c, prefixes[p], h->revision, false, 0, &kvs, timeout_ms);
		for (size_t i = 0; !rc && i < kvs.n; i++) {
			const struct cl_etcd_kv *kv = &kvs.kv[i];
			char name[CL_REC_MAX_NAME + 1];
			enum cl_members_mark_kind kind;
			struct cl_healstat st;
			int64_t at;
			size_t nl = kv->key_len - pl;

			if (kv->key_len <= pl || nl >= sizeof(name))
				continue;
			memcpy(name, kv->key + pl, nl);
			name[nl] = '\0';
			if (!cl_rec_node_name_ok(name))
				continue;
			if (p < 2 && cl_members_mark_parse(kv->value, kv->value_len, p == 1, &kind,
			                                   &at) == 0)
				rc = cl_health_node_mark(h, name, (int)kind, at);
			else if (p == 2 && cl_healstat_parse(kv->value, kv->value_len, &st) == 0)
				rc = cl_health_node_stat(h, name, &st);
		}
		cl_etcd_kvs_fini(&kvs);
	}
	return rc;
}

int
cl_health_read_keys(struct cl_etcd *c, struct cl_health *h, unsigned timeout_ms)
{
	struct cl_etcd_kvs nodes = { 0 }, members = { 0 }, checks = { 0 }, cnt = { 0 };
	size_t npl = strlen(CL_MEMBERS_NODES_PREFIX), mpl = strlen(CL_HEALTH_MEMBERS);
	int rc;

	/* linearizable: the revision everything else is read at is current */
	rc = read_prefix(c, CL_MEMBERS_NODES_PREFIX, 0, false, 0, &nodes, timeout_ms);
	if (rc)
		return rc;
	h->revision = nodes.revision;
	rc = read_prefix(c, CL_HEALTH_MEMBERS, h->revision, true, 0, &members, timeout_ms);
	if (!rc)
		rc = read_prefix(c, CL_HEALTH_CELLCHECK, h->revision, false, 0, &checks,
		                 timeout_ms);
	for (size_t i = 0; !rc && i < members.n; i++)
		if (members.kv[i].key_len > mpl && cl_rec_node_name_ok(members.kv[i].key + mpl))
			rc = cl_health_node_add(h, members.kv[i].key + mpl, true, false, false);
	for (size_t i = 0; !rc && i < nodes.n; i++) {
		struct cl_rec_node ni = { 0 };
		const struct cl_etcd_kv *ck;
		char why[CL_REC_WHY_MAX], store[64];
		bool checked = false;

		if (nodes.kv[i].key_len <= npl)
			continue;
		/* a value that does not decode is no live node: its cells count as absent */
		if (cl_rec_node_decode(nodes.kv[i].value, nodes.kv[i].value_len, &ni, why,
		                       sizeof(why)) != 0)
			continue;
		if (strcmp(ni.name, nodes.kv[i].key + npl) == 0) {
			ck = check_of(&checks, ni.name);
			checked = ck && store_of(&ni, store, sizeof(store)) &&
			          ck->value_len == strlen(store) &&
			          memcmp(ck->value, store, ck->value_len) == 0;
			rc = cl_health_node_add(h, ni.name, false, true, checked);
			if (!rc)
				rc = cl_health_node_place(h, &ni);
		}
		cl_rec_node_fini(&ni);
	}
	if (!rc)
		rc = read_marks(c, h, timeout_ms);
	if (!rc)
		rc = read_prefix(c, CL_META_HEAL, h->revision, true, 1, &cnt, timeout_ms);
	if (!rc) {
		h->todo_keys = (uint64_t)cnt.count;
		cl_etcd_kvs_fini(&cnt);
		rc = read_prefix(c, CL_HEALTH_LOCKS, h->revision, true, 1, &cnt, timeout_ms);
		if (!rc)
			h->heal_locks = (uint64_t)cnt.count;
	}
	cl_etcd_kvs_fini(&cnt);
	cl_etcd_kvs_fini(&checks);
	cl_etcd_kvs_fini(&members);
	cl_etcd_kvs_fini(&nodes);
	return rc;
}

int
cl_health_read_records(struct cl_etcd *c, struct cl_health *h, unsigned timeout_ms,
                       uint64_t *ranges)
{
	static const char end[] = "/zest/objects0"; /* CL_META_OBJECTS with '/' + 1 */
	size_t pl = strlen(CL_META_OBJECTS);
	char *from = strdup(CL_META_OBJECTS);
	size_t from_len = pl;
	int rc = 0;

	if (ranges)
		*ranges = 0;
	if (!from)
		return -ENOMEM;
	for (;;) {
		struct cl_etcd_range r = { .key = from,
			                   .key_len = from_len,
			                   .end = end,
			                   .end_len = sizeof(end) - 1,
			                   .limit = CL_HEALTH_PAGE,
			                   .revision = h->revision,
			                   .serializable = true };
		struct cl_etcd_kvs kvs = { 0 };
		bool more;

		rc = cl_etcd_range(c, &r, &kvs, timeout_ms);
		if (ranges)
			(*ranges)++;
		if (rc)
			break;
		for (size_t i = 0; i < kvs.n; i++) {
			struct cl_rec_object o = { 0 };
			char why[CL_REC_WHY_MAX];
			const char *name = kvs.kv[i].key + pl;

			if (cl_rec_object_decode(kvs.kv[i].value, kvs.kv[i].value_len, &o, why,
			                         sizeof(why)) == 0)
				cl_health_record_add(h, name, &o);
			else
				cl_health_record_bad(h, name);
			cl_rec_object_fini(&o);
		}
		more = kvs.more && kvs.n > 0;
		if (more) {
			/* the next page starts just after the last key: key + "\0" */
			const struct cl_etcd_kv *last = &kvs.kv[kvs.n - 1];
			char *next = malloc(last->key_len + 1);

			if (!next) {
				cl_etcd_kvs_fini(&kvs);
				rc = -ENOMEM;
				break;
			}
			memcpy(next, last->key, last->key_len);
			next[last->key_len] = '\0';
			free(from);
			from = next;
			from_len = last->key_len + 1;
		}
		cl_etcd_kvs_fini(&kvs);
		if (!more)
			break;
	}
	free(from);
	return rc;
}
