/* dn_cluster: registration of a datanode in etcd (dn_cluster.h). */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "dn_cluster.h"
#include "dn_health.h"
#include "cl_rec.h"
#include "cl_etcd.h"
#include "cl_health.h"
#include "cl_members.h"
#include "zc.h"

#define MEMBERS_PREFIX "/zest/members/"
#define RETRY_MS       1000
#define REFRESH_MS     30000 /* NodeInfo's free space, at the latest */
#define CHECK_MS       2000  /* ... and sooner when it moved (a drive filling up) */

struct dn_cluster {
	struct dn_cluster_opts o; /* its strings point at the copies below */
	char node[CL_REC_MAX_NAME + 1];
	char zone[CL_REC_MAX_NAME + 1];
	char address[300];
	char node_key[sizeof(CL_MEMBERS_NODES_PREFIX) + CL_REC_MAX_NAME];
	char member_key[sizeof(MEMBERS_PREFIX) + CL_REC_MAX_NAME];
	uint64_t incarnation;
	uint64_t started_ns; /* wall clock */
	struct cl_etcd *etcd;
	struct cl_members *members;

	pthread_mutex_t mu; /* lease, ka, lost, stop */
	pthread_cond_t cv;
	int64_t lease;
	struct cl_etcd_keepalive *ka;
	bool lost, stop;
	bool retire; /* decommissioned: stop, give the lease up, never register again */
	bool left;   /* dn_cluster_leave ran (main thread only) */
	pthread_t thread;
	atomic_bool registered;
	atomic_uint_fast64_t registrations;
	struct dn_health health; /* the metrics thread's */
	uint64_t put_free;       /* the keeper's: free_bytes of the last NodeInfo put */
	uint64_t put_ns;         /* ... and when */
};

static uint64_t
wall_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* "<store>/<index>" from the folder's zest-drive file (dn_store.c writes it at open). */
static char *
drive_id(const char *root, unsigned index)
{
	char path[4096], line[160], store[40], *id;
	FILE *f;

	snprintf(path, sizeof(path), "%s/zest-drive", root);
	f = fopen(path, "r");
	if (!f)
		return NULL;
	if (!fgets(line, sizeof(line), f) || sscanf(line, "zest-drive v1 store=%32s", store) != 1) {
		fclose(f);
		return NULL;
	}
	fclose(f);
	if (asprintf(&id, "%s/%u", store, index) < 0)
		return NULL;
	return id;
}

static void
free_drives(struct cl_rec_drive *d, unsigned n)
{
	for (unsigned i = 0; d && i < n; i++)
		free(d[i].id);
	free(d);
}

/* The drives as NodeInfo lists them (each with its file system's free bytes), *cap their
 * sum and *avail the bytes above the reserve of each: what placement may still fill. NULL
 * on a missing identity file or no memory. */
static struct cl_rec_drive *
read_drives(const struct dn_cluster *c, uint64_t *cap, uint64_t *avail)
{
	struct cl_rec_drive *d = calloc(c->o.ndrives ? c->o.ndrives : 1, sizeof(*d));

	*cap = *avail = 0;
	for (unsigned i = 0; d && i < c->o.ndrives; i++) {
		struct statvfs st;

		d[i].index = i;
		d[i].id = drive_id(c->o.drives[i], i);
		if (!d[i].id) {
			ZC_ERR("cluster", "drive=%s: no readable zest-drive identity",
			       c->o.drives[i]);
			free_drives(d, c->o.ndrives);
			return NULL;
		}
		if (statvfs(c->o.drives[i], &st) == 0) {
			d[i].capacity_bytes = (uint64_t)st.f_blocks * st.f_frsize;
			d[i].free_bytes = (uint64_t)st.f_bavail * st.f_frsize;
		}
		*cap += d[i].capacity_bytes;
		if (d[i].free_bytes > c->o.reserve)
			*avail += d[i].free_bytes - c->o.reserve;
	}
	return d;
}

/* Put /zest/members/<name>: first_seen kept from the record there, if any. */
static int
put_member(struct dn_cluster *c, const struct cl_rec_drive *drives)
{
	struct cl_rec_member mi = { 0 }, old = { 0 };
	struct cl_etcd_kvs kvs = { 0 };
	char why[CL_REC_WHY_MAX], *ids[64];
	uint8_t *buf;
	size_t len;
	int rc;

	rc = cl_etcd_get(c->etcd, c->member_key, strlen(c->member_key), false, &kvs, 0);
	if (rc < 0 && !zc_err_is(rc, ZC_NO_KEY))
		return rc;
	mi.first_seen_ns = c->started_ns;
	if (rc == 0) {
		if (cl_rec_member_decode(kvs.kv[0].value, kvs.kv[0].value_len, &old, why,
		                         sizeof(why)) == 0)
			mi.first_seen_ns = old.first_seen_ns;
		else
			ZC_WARN("cluster", "key=%s: replacing a value that does not decode: %s",
			        c->member_key, why);
	}
	cl_etcd_kvs_fini(&kvs);
	mi.name = (char *)c->o.node;
	mi.address = (char *)c->o.address;
	mi.last_seen_ns = c->started_ns;
	mi.incarnation = c->incarnation;
	for (unsigned i = 0; i < c->o.ndrives && i < 64; i++)
		ids[i] = drives[i].id;
	mi.drive_ids = ids;
	mi.ndrive_ids = c->o.ndrives < 64 ? c->o.ndrives : 64;
	rc = cl_rec_member_encode(&mi, &buf, &len, why, sizeof(why));
	cl_rec_member_fini(&old);
	if (rc == -EINVAL)
		ZC_ERR("cluster", "cannot encode MemberInfo: %s", why);
	if (rc)
		return rc;
	rc = cl_etcd_put(c->etcd, c->member_key, strlen(c->member_key), buf, len, 0, NULL, 0);
	free(buf);
	return rc;
}

static int
encode_node(const struct dn_cluster *c, const struct cl_rec_drive *drives, uint64_t cap,
            uint64_t avail, uint8_t **buf, size_t *len)
{
	struct cl_rec_node ni = { 0 };
	char why[CL_REC_WHY_MAX];
	int rc;

	ni.name = (char *)c->o.node;
	ni.address = (char *)c->o.address;
	ni.incarnation = c->incarnation;
	ni.state = CL_REC_NODE_UP;
	ni.drives = (struct cl_rec_drive *)drives;
	ni.ndrives = c->o.ndrives;
	ni.capacity_bytes = cap;
	ni.free_bytes = avail;
	ni.started_ns = c->started_ns;
	ni.version = ZEST_VERSION;
	ni.zone = c->o.zone ? (char *)c->o.zone : NULL;
	rc = cl_rec_node_encode(&ni, buf, len, why, sizeof(why));
	if (rc == -EINVAL)
		ZC_ERR("cluster", "cannot encode NodeInfo: %s", why);
	return rc;
}

/* Has the free space moved enough since the last put to tell the placers now? Reaching or
 * leaving 0 (full) always is; else 1/64 of the capacity. */
static bool
free_moved(const struct dn_cluster *c, uint64_t cap, uint64_t avail)
{
	uint64_t d = avail > c->put_free ? avail - c->put_free : c->put_free - avail;

	if (!avail != !c->put_free)
		return true;
	return d > cap / 64;
}

/* Rewrite NodeInfo under the current lease: free space changes as the drives fill. A put
 * under a lease etcd no longer has fails, so this never resurrects an expired key. Checked
 * every CHECK_MS, put when it moved (free_moved) or REFRESH_MS after the last. */
static void
refresh_node(struct dn_cluster *c, int64_t lease)
{
	struct cl_rec_drive *drives;
	uint64_t cap, avail;
	uint8_t *buf = NULL;
	size_t len;
	int rc = -ENOMEM;

	drives = read_drives(c, &cap, &avail);
	if (drives && !free_moved(c, cap, avail) &&
	    zc_now_ns() - c->put_ns < (uint64_t)REFRESH_MS * 1000000u) {
		free_drives(drives, c->o.ndrives);
		return;
	}
	if (drives && (rc = encode_node(c, drives, cap, avail, &buf, &len)) == 0)
		rc = cl_etcd_put(c->etcd, c->node_key, strlen(c->node_key), buf, len, lease, NULL,
		                 0);
	if (rc == 0) {
		if (!avail != !c->put_free)
			ZC_INFO("cluster", "node=%s free above the reserve: %llu bytes%s",
			        c->o.node, (unsigned long long)avail,
			        avail ? "" : ": takes no new cells");
		c->put_free = avail;
		c->put_ns = zc_now_ns();
	}
	free(buf);
	free_drives(drives, c->o.ndrives);
	if (rc)
		ZC_WARN("cluster", "node=%s: NodeInfo refresh failed err=%d", c->o.node, rc);
}

/*
 * Create /zest/nodes/<name> under a new lease, only if absent or ours (the same
 * incarnation: a registration whose lease etcd still had). Returns 0, -EEXIST with the
 * holder's address in `holder`, or an etcd error. The lease is ours on 0 only.
 */
static int
put_node(struct dn_cluster *c, const struct cl_rec_drive *drives, uint64_t cap, uint64_t avail,
         int64_t *lease_out, char *holder, size_t hcap)
{
	struct cl_rec_node old = { 0 };
	struct cl_etcd_cmp cmp = { .key = c->node_key,
		                   .key_len = strlen(c->node_key),
		                   .target = CL_ETCD_CMP_VERSION,
		                   .op = CL_ETCD_EQUAL,
		                   .num = 0 };
	struct cl_etcd_op put = { .type = CL_ETCD_OP_PUT,
		                  .r = { .key = c->node_key, .key_len = strlen(c->node_key) } };
	struct cl_etcd_op get = { .type = CL_ETCD_OP_RANGE,
		                  .r = { .key = c->node_key, .key_len = strlen(c->node_key) } };
	struct cl_etcd_txn txn = { &cmp, 1, &put, 1, &get, 1 };
	struct cl_etcd_txn_result res = { 0 };
	char why[CL_REC_WHY_MAX];
	int64_t lease, ttl;
	uint8_t *buf;
	size_t len;
	int rc;

	rc = encode_node(c, drives, cap, avail, &buf, &len);
	if (rc)
		return rc;
	rc = cl_etcd_lease_grant(c->etcd, c->o.ttl_s, &lease, &ttl, 0);
	if (rc)
		goto out;
	put.value = buf;
	put.value_len = len;
	put.lease = lease;
	rc = cl_etcd_txn(c->etcd, &txn, &res, 0);
	if (rc == 0 && !res.succeeded) {
		const struct cl_etcd_kvs *k = res.n_op ? &res.op[0].kvs : NULL;

		if (k && k->n &&
		    cl_rec_node_decode(k->kv[0].value, k->kv[0].value_len, &old, why,
		                       sizeof(why)) == 0 &&
		    old.incarnation == c->incarnation) {
			/* ours, under a lease we gave up on: move it to the new one */
			rc = cl_etcd_put(c->etcd, c->node_key, strlen(c->node_key), buf, len, lease,
			                 NULL, 0);
		} else {
			snprintf(holder, hcap, "%s", old.address ? old.address : "(undecodable)");
			rc = -EEXIST;
		}
		cl_rec_node_fini(&old);
	}
	cl_etcd_txn_result_fini(&res);
	if (rc == 0)
		*lease_out = lease;
	else
		cl_etcd_lease_revoke(c->etcd, lease, 0);
out:
	free(buf);
	return rc;
}

static void
lease_lost(void *arg, int64_t id, int err)
{
	struct dn_cluster *c = arg;

	ZC_WARN("cluster", "node=%s lease=%lld lost err=%d: registering again", c->o.node,
	        (long long)id, err);
	atomic_store(&c->registered, false);
	pthread_mutex_lock(&c->mu);
	c->lost = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

/* One registration: NodeInfo under a fresh lease, MemberInfo, then the keepalive. */
static int
register_once(struct dn_cluster *c, char *holder, size_t hcap)
{
	struct cl_etcd_keepalive *ka = NULL;
	struct cl_rec_drive *drives;
	uint64_t cap, avail;
	int64_t lease = 0;
	int rc;

	drives = read_drives(c, &cap, &avail);
	if (!drives)
		return -EINVAL;
	rc = put_node(c, drives, cap, avail, &lease, holder, hcap);
	if (rc == 0) {
		if (!avail)
			ZC_WARN("cluster",
			        "node=%s has no free space above --reserve %llu on any drive: it "
			        "takes no new cells",
			        c->o.node, (unsigned long long)c->o.reserve);
		c->put_free = avail;
		c->put_ns = zc_now_ns();
		rc = put_member(c, drives);
	}
	if (rc == 0)
		rc = cl_etcd_keepalive_start(c->etcd, lease, c->o.ttl_s, lease_lost, c, &ka);
	free_drives(drives, c->o.ndrives);
	if (rc) {
		if (lease)
			cl_etcd_lease_revoke(c->etcd, lease, 0);
		return rc;
	}
	pthread_mutex_lock(&c->mu);
	c->lease = lease;
	c->ka = ka;
	pthread_mutex_unlock(&c->mu);
	atomic_store(&c->registered, true);
	atomic_fetch_add(&c->registrations, 1);
	ZC_INFO("cluster", "registered node=%s address=%s lease=%lld incarnation=%016llx",
	        c->o.node, c->o.address, (long long)lease, (unsigned long long)c->incarnation);
	return 0;
}

/* Wait up to ms on the condition; returns true when stopping. Called with mu held. */
static bool
wait_ms(struct dn_cluster *c, unsigned ms)
{
	struct timespec ts;

	zc_deadline(&ts, CLOCK_MONOTONIC, (uint64_t)ms * 1000000u);
	if (!c->stop && !c->lost)
		pthread_cond_timedwait(&c->cv, &c->mu, &ts);
	return c->stop;
}

/* Wait ms for stop alone (a lost lease does not cut it short); true when stopping. */
static bool
wait_stop(struct dn_cluster *c, unsigned ms)
{
	struct timespec ts;
	bool stop;

	zc_deadline(&ts, CLOCK_MONOTONIC, (uint64_t)ms * 1000000u);
	pthread_mutex_lock(&c->mu);
	while (!c->stop && pthread_cond_timedwait(&c->cv, &c->mu, &ts) != ETIMEDOUT)
		;
	stop = c->stop;
	pthread_mutex_unlock(&c->mu);
	return stop;
}

/* The keeper: after a lost lease, register again every RETRY_MS until it works (a loss
 * reported while it registers, even by the new lease, sets `lost` again: never missed);
 * otherwise refresh NodeInfo every REFRESH_MS. */
static void *
keeper(void *arg)
{
	struct dn_cluster *c = arg;

	pthread_mutex_lock(&c->mu);
	while (!c->stop) {
		struct cl_etcd_keepalive *ka;
		char holder[256] = "";
		int rc;

		if (!c->lost) {
			int64_t lease = c->lease;

			if (wait_ms(c, CHECK_MS) || c->lost || !lease || lease != c->lease)
				continue;
			pthread_mutex_unlock(&c->mu);
			refresh_node(c, lease);
			pthread_mutex_lock(&c->mu);
			continue;
		}
		ka = c->ka;
		c->ka = NULL;
		c->lease = 0;
		c->lost = false;
		pthread_mutex_unlock(&c->mu);
		cl_etcd_keepalive_stop(ka); /* its thread ended after the callback */
		for (unsigned tries = 0; (rc = register_once(c, holder, sizeof(holder))) != 0;
		     tries++) {
			bool stop;

			if (tries % 30 == 0) /* the etcd client logs each failed call already */
				ZC_WARN("cluster",
				        "node=%s cannot register again err=%d tries=%u%s%s",
				        c->o.node, rc, tries + 1,
				        rc == -EEXIST ? ": name held by " : "",
				        rc == -EEXIST ? holder : "");
			pthread_mutex_lock(&c->mu);
			stop = wait_ms(c, RETRY_MS);
			pthread_mutex_unlock(&c->mu);
			if (stop)
				return NULL;
		}
		pthread_mutex_lock(&c->mu);
	}
	if (c->retire) {
		struct cl_etcd_keepalive *ka = c->ka;
		int64_t lease = c->lease;

		c->ka = NULL;
		c->lease = 0;
		pthread_mutex_unlock(&c->mu);
		atomic_store(&c->registered, false);
		cl_etcd_keepalive_stop(ka);
		if (lease)
			(void)cl_etcd_lease_revoke(c->etcd, lease, 0);
		ZC_INFO("cluster", "node=%s decommissioned: registration given up", c->o.node);
		return NULL;
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

void
dn_cluster_retire(struct dn_cluster *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->retire = true;
	c->stop = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

/* /zest/cellcheck/<node> away: the healer deletes it too before its check, but only after
 * the node registered; a reader between the two would count this empty store as checked. */
static int
forget_check(struct dn_cluster *c)
{
	char key[sizeof(CL_HEALTH_CELLCHECK) + CL_REC_MAX_NAME];
	struct cl_etcd_range r = { .key = key };

	r.key_len = (size_t)snprintf(key, sizeof(key), CL_HEALTH_CELLCHECK "%s", c->o.node);
	return cl_etcd_delete(c->etcd, &r, NULL, NULL, 0);
}

static void
destroy(struct dn_cluster *c)
{
	cl_members_destroy(c->members);
	cl_etcd_destroy(c->etcd);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

int
dn_cluster_start(const struct dn_cluster_opts *o, struct dn_cluster **out)
{
	struct cl_etcd_opts eo = { .ca_file = o->ca_file,
		                   .cert_file = o->cert_file,
		                   .key_file = o->key_file };
	struct dn_cluster *c;
	pthread_condattr_t ca;
	uint64_t deadline;
	char holder[256] = "";
	int rc;

	if (!cl_rec_node_name_ok(o->node)) {
		ZC_ERR("cluster", "--node \"%s\" is not a node name (1-%d of A-Z a-z 0-9 . _ -)",
		       o->node ? o->node : "", CL_REC_MAX_NAME);
		return -EINVAL;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->o = *o;
	if (!o->address || strlen(o->address) >= sizeof(c->address)) {
		ZC_ERR("cluster", "bad advertised address \"%s\"", o->address ? o->address : "");
		free(c);
		return -EINVAL;
	}
	if (o->zone && !cl_rec_node_name_ok(o->zone)) {
		ZC_ERR("cluster", "--zone \"%s\" is not a zone name (1-%d of A-Z a-z 0-9 . _ -)",
		       o->zone, CL_REC_MAX_NAME);
		free(c);
		return -EINVAL;
	}
	/* copies: the caller's strings may be gone (the keeper registers again much later) */
	strcpy(c->node, o->node);
	if (o->zone) {
		strcpy(c->zone, o->zone);
		c->o.zone = c->zone;
	}
	strcpy(c->address, o->address);
	c->o.node = c->node;
	c->o.address = c->address;
	c->o.endpoints = NULL; /* only for cl_etcd_create, below */
	if (!c->o.ttl_s)
		c->o.ttl_s = DN_CLUSTER_TTL_S;
	snprintf(c->node_key, sizeof(c->node_key), CL_MEMBERS_NODES_PREFIX "%s", o->node);
	snprintf(c->member_key, sizeof(c->member_key), MEMBERS_PREFIX "%s", o->node);
	while (c->incarnation == 0)
		if (getrandom(&c->incarnation, sizeof(c->incarnation), 0) != sizeof(c->incarnation))
			c->incarnation = wall_ns() ^ (uint64_t)getpid() << 32;
	c->started_ns = wall_ns();
	pthread_mutex_init(&c->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	rc = cl_etcd_create(o->endpoints, &eo, &c->etcd);
	if (rc) {
		ZC_ERR("cluster", "bad --cluster \"%s\" err=%d", o->endpoints, rc);
		destroy(c);
		return rc;
	}
	/* a crashed predecessor's key lives until its lease expires: wait one TTL for it */
	deadline = zc_now_ns() + (uint64_t)(c->o.ttl_s + 2) * 1000000000u;
	/* etcd unreachable here fails as a registration does (below) */
	rc = o->store_fresh ? forget_check(c) : 0;
	while (rc == 0 && (rc = register_once(c, holder, sizeof(holder))) == -EEXIST &&
	       zc_now_ns() < deadline) {
		ZC_INFO("cluster", "node=%s is held by %s; waiting for its lease to expire",
		        o->node, holder);
		rc = wait_stop(c, RETRY_MS) ? -ECANCELED : 0;
		if (rc)
			break;
	}
	if (rc) {
		if (rc == -EEXIST)
			ZC_ERR("cluster", "node name %s is registered by a live process at %s",
			       o->node, holder);
		else
			ZC_ERR("cluster", "cannot register node=%s in etcd at %s err=%d (%s)",
			       o->node, o->endpoints, rc,
			       rc <= -ZC_ERR_BASE ? zc_code_word(zc_err_code(rc)) : strerror(-rc));
		destroy(c);
		return rc;
	}
	/* the view counts a registered node only once an mTLS connection to it found a
	 * certificate naming it, so a node of another CA or with another node's certificate
	 * is never placed on (cl_members.h) */
	rc = cl_members_create_opts(
	        c->etcd,
	        &(struct cl_members_opts){
	                .tls = o->cert_file ? &(struct rpc_tls){ .ca_file = o->ca_file,
	                                                         .cert_file = o->cert_file,
	                                                         .key_file = o->key_file }
	                                    : NULL },
	        &c->members);
	if (rc == 0) {
		rc = pthread_create(&c->thread, NULL, keeper, c) ? -EAGAIN : 0;
		if (rc == 0)
			pthread_setname_np(c->thread, "dn-cluster");
	}
	if (rc) {
		cl_etcd_keepalive_stop(c->ka);
		cl_etcd_lease_revoke(c->etcd, c->lease, 0);
		destroy(c);
		return rc;
	}
	*out = c;
	return 0;
}

void
dn_cluster_leave(struct dn_cluster *c)
{
	int rc;

	if (!c || c->left)
		return;
	c->left = true;
	pthread_mutex_lock(&c->mu);
	c->stop = true;
	pthread_cond_signal(&c->cv);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->thread, NULL);
	cl_etcd_keepalive_stop(c->ka);
	c->ka = NULL;
	atomic_store(&c->registered, false);
	if (c->lease) {
		rc = cl_etcd_lease_revoke(c->etcd, c->lease, 2000);
		if (rc && !zc_err_is(rc, ZC_NO_KEY))
			ZC_WARN("cluster",
			        "node=%s: lease revoke failed err=%d; the key goes with its TTL",
			        c->o.node, rc);
		else
			ZC_INFO("cluster", "deregistered node=%s", c->o.node);
		c->lease = 0;
	}
}

void
dn_cluster_destroy(struct dn_cluster *c)
{
	if (!c)
		return;
	dn_cluster_leave(c);
	destroy(c);
}

void
dn_cluster_metrics(struct dn_cluster *c, FILE *out)
{
	const struct cl_members_view *v = cl_members_get(c->members);

	fprintf(out,
	        "# HELP zest_cluster_live_nodes Datanodes registered in etcd at the last "
	        "membership read whose certificate was verified to name them.\n"
	        "# TYPE zest_cluster_live_nodes gauge\n"
	        "zest_cluster_live_nodes %zu\n"
	        "# HELP zest_cluster_unverified_nodes Datanodes registered in etcd left out of "
	        "the view: no mTLS connection to a certificate of the CA naming them.\n"
	        "# TYPE zest_cluster_unverified_nodes gauge\n"
	        "zest_cluster_unverified_nodes %zu\n"
	        "# HELP zest_cluster_registered 1 while this node's registration holds a lease.\n"
	        "# TYPE zest_cluster_registered gauge\n"
	        "zest_cluster_registered %d\n"
	        "# HELP zest_cluster_registrations_total Registrations of this process (1 + "
	        "re-registrations after a lost lease).\n"
	        "# TYPE zest_cluster_registrations_total counter\n"
	        "zest_cluster_registrations_total %llu\n",
	        v->n, v->unverified, atomic_load(&c->registered) ? 1 : 0,
	        (unsigned long long)atomic_load(&c->registrations));
	cl_members_view_put(v);
	v = cl_members_get_place(c->members);
	fprintf(out,
	        "# HELP zest_cluster_placement_nodes Live datanodes new cells may go to: the "
	        "live view without drained, decommissioning and maintenance nodes.\n"
	        "# TYPE zest_cluster_placement_nodes gauge\n"
	        "zest_cluster_placement_nodes %zu\n",
	        v->n);
	cl_members_view_put(v);
	dn_health_metrics(&c->health, c->etcd, c->o.group_cells, out);
}

struct cl_etcd *
dn_cluster_etcd(struct dn_cluster *c)
{
	return c ? c->etcd : NULL;
}

struct cl_members *
dn_cluster_members(struct dn_cluster *c)
{
	return c ? c->members : NULL;
}
