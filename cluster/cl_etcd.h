/*
 * cl_etcd: a client of etcd's v3 gRPC API (etcd 3.4) over the gRPC core C API, for the
 * cluster's shared state: membership, metadata, leases. etcd does the consensus; this is
 * only a careful caller. Wire contract: cluster/etcd.proto + cluster/etcd_kv.proto (etcd's own
 * packages and field numbers). No protobuf-c type appears here: requests and results are
 * zest's own structs.
 *
 * Threads: every call blocks the calling thread until etcd answers or its deadline passes
 * (timeout_ms; 0 takes the client's default). Any number of threads may call at once on
 * one client. The client has one thread of its own ("etcd-cq", its completion queue)
 * and each keepalive one more ("etcd-keepalive", where its lost callback runs).
 *
 * Endpoints and failover: a client holds one channel per endpoint and sends each call to
 * its current endpoint. When that answers UNAVAILABLE (member down, or up without a
 * leader) the call moves to the next endpoint and the client stays there; when every
 * endpoint refuses, passes repeat for about a second (a channel that failed once refuses
 * until its reconnect backoff, at most 1 s, has passed) and the call then fails with
 * ZC_E(ZC_NO_QUORUM) without waiting for its deadline. A deadline that passes moves the
 * client on for the next call too (a member that hangs rather than refuses). With more
 * than one endpoint an attempt gets half the deadline (at least 1 s), so a request lost
 * with a leader that died is sent again elsewhere in time. So a 3-member cluster that
 * loses one member keeps working; the calls that meet the loss take up to half their
 * deadline longer.
 * A call retried on another member may already have been applied by the first: make
 * writes safe to repeat (a put of the same value, or a txn fenced by a compare on
 * mod_revision / version), as every zest write to etcd is.
 *
 * Errors: >= 0 on success, else -errno or ZC_E(code) (common/zc_err.h):
 *   ZC_E(ZC_NO_QUORUM)   no endpoint answered for ~1.2 s (all down, or no leader): 503
 *   -ETIMEDOUT           the deadline passed (zc_err_code: ZC_UNAVAILABLE, also 503)
 *   ZC_E(ZC_NO_KEY)      cl_etcd_get: no such key; lease calls: no such lease
 *   -EINVAL              a bad argument, or etcd refused the request as malformed
 *                        (for instance two ops of one txn on the same key)
 *   -ERANGE              a revision that was compacted or lies in the future
 *   ZC_E(ZC_SLOW_DOWN)   etcd is overloaded or out of space (RESOURCE_EXHAUSTED)
 *   ZC_E(ZC_PRECONDITION) etcd's FAILED_PRECONDITION (for instance a lease ID in use)
 *   -ECANCELED           the call was cancelled
 *   -EACCES              etcd's authentication refused the call (a TLS handshake that
 *                        fails looks like a member down to gRPC: ZC_E(ZC_NO_QUORUM),
 *                        with the reason in the log)
 *   -EIO                 anything else, or a reply that does not parse
 * An endpoint that does not answer is logged at warning level with etcd's or gRPC's
 * message; refusals (-EINVAL, ZC_E(ZC_NO_KEY), ...) only at debug level: the caller decides.
 *
 * Ownership: every pointer argument is borrowed for the call. Results (struct
 * cl_etcd_kvs, struct cl_etcd_txn_result) are owned by the caller once a call returns
 * 0 and are released with their _fini; on failure they are left empty (fini is still
 * safe). Keys and values in results are NUL-terminated copies (the NUL is not counted in
 * the lengths), so text keys can be used as strings.
 */
#ifndef ZEST_CL_ETCD_H
#define ZEST_CL_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "zc_err.h"

#define CL_ETCD_DEFAULT_TIMEOUT_MS 5000
#define CL_ETCD_MAX_ENDPOINTS      16

struct cl_etcd;

struct cl_etcd_opts {
	unsigned timeout_ms; /* the deadline of a call given timeout_ms 0; 0: 5000 */
	/* TLS, used when the endpoints are https:// (all or none of them must be) */
	const char *ca_file;   /* PEM file of the CAs to trust; NULL: the system's */
	const char *cert_file; /* PEM client certificate for mTLS; NULL: none */
	const char *key_file;  /* its PEM private key (with cert_file) */
};

/*
 * Connect to etcd at endpoints, a comma-separated list of host:port, each optionally
 * prefixed by http:// or https:// ("127.0.0.1:2379,127.0.0.1:22379"). opts may be NULL.
 * Channels connect lazily: create succeeds with every member down. Returns 0 and *out, or
 * -EINVAL (empty or malformed list, mixed schemes, more than CL_ETCD_MAX_ENDPOINTS,
 * unreadable TLS files), -ENOMEM.
 */
int cl_etcd_create(const char *endpoints, const struct cl_etcd_opts *opts, struct cl_etcd **out);

/* Close the channels. Every call on c must have returned and every keepalive been
 * stopped. NULL is a no-op. */
void cl_etcd_destroy(struct cl_etcd *c);

/* ------------------------------------------------------------------ keys */

struct cl_etcd_kv {
	char *key;
	size_t key_len;
	char *value; /* NULL with keys_only */
	size_t value_len;
	int64_t create_revision; /* revision of the key's creation */
	int64_t mod_revision;    /* revision of its last change: the fence for a txn */
	int64_t version;         /* changes since creation, 1 after the first put */
	int64_t lease;           /* the lease it belongs to, 0 for none */
};

/* Keys read by a range or get. One allocation: release with cl_etcd_kvs_fini. */
struct cl_etcd_kvs {
	struct cl_etcd_kv *kv;
	size_t n;
	bool more;        /* more keys lie in the range than the limit let through */
	int64_t count;    /* keys in the range (all of them, not only the n returned) */
	int64_t revision; /* the store's revision the read saw */
};

void cl_etcd_kvs_fini(struct cl_etcd_kvs *kvs);

/*
 * Which keys: key alone; or [key, end) when end is set; or every key starting with key
 * when prefix is set (end ignored; an empty key with prefix: every key). The other
 * fields apply to reads only.
 */
struct cl_etcd_range {
	const void *key;
	size_t key_len;
	const void *end;
	size_t end_len;
	bool prefix;
	int64_t limit;     /* at most this many keys, in key order; 0: all */
	int64_t revision;  /* read the store as of this revision; 0: the newest */
	bool serializable; /* read the member's own copy, without a quorum round trip:
	                    * faster, may be stale, works on a member cut off from the rest */
	bool keys_only;    /* leave values out */
};

/* Read one key. Returns 0 and out->kv[0] (out->n == 1), ZC_E(ZC_NO_KEY) if it does not exist
 * (out->revision still set), or an error. serializable: see struct cl_etcd_range. */
int cl_etcd_get(struct cl_etcd *c, const void *key, size_t key_len, bool serializable,
                struct cl_etcd_kvs *out, unsigned timeout_ms);

/* Read the keys r names, in key order. Returns 0 (possibly with out->n == 0) or an error. */
int cl_etcd_range(struct cl_etcd *c, const struct cl_etcd_range *r, struct cl_etcd_kvs *out,
                  unsigned timeout_ms);

/* Set key to value, attached to lease (0: none; the key goes when the lease does).
 * *revision (if not NULL) gets the store's revision after the put, which is the key's
 * new mod_revision. */
int cl_etcd_put(struct cl_etcd *c, const void *key, size_t key_len, const void *value,
                size_t value_len, int64_t lease, int64_t *revision, unsigned timeout_ms);

/* Delete the keys r names (limit, revision, serializable and keys_only must be 0/false).
 * *deleted: how many went; *revision: the store's revision after. Either may be NULL.
 * Deleting nothing is a success with *deleted == 0. */
int cl_etcd_delete(struct cl_etcd *c, const struct cl_etcd_range *r, int64_t *deleted,
                   int64_t *revision, unsigned timeout_ms);

/* ------------------------------------------------------------------ transactions */

/* The field of a key a compare looks at; a missing key has version, create_revision and
 * mod_revision 0 and no value (so "version == 0" means "does not exist"). */
enum cl_etcd_cmp_target {
	CL_ETCD_CMP_VERSION, /* same values as etcd's Compare.CompareTarget */
	CL_ETCD_CMP_CREATE,
	CL_ETCD_CMP_MOD,
	CL_ETCD_CMP_VALUE,
};

enum cl_etcd_cmp_op {
	CL_ETCD_EQUAL, /* same values as etcd's Compare.CompareResult */
	CL_ETCD_GREATER,
	CL_ETCD_LESS,
	CL_ETCD_NOT_EQUAL,
};

/* "target(key) op operand": operand is num for VERSION/CREATE/MOD, value for VALUE. With
 * end set, the compare holds when it holds for every key in [key, end) (an empty range
 * compares as one missing key, so "version == 0" over a range means "no key in it"; etcd
 * reads the whole range to decide). */
struct cl_etcd_cmp {
	const void *key;
	size_t key_len;
	enum cl_etcd_cmp_target target;
	enum cl_etcd_cmp_op op;
	int64_t num;
	const void *value;
	size_t value_len;
	const void *end; /* NULL: key alone (last, so positional initialisers stay valid) */
	size_t end_len;
};

enum cl_etcd_op_type {
	CL_ETCD_OP_PUT,
	CL_ETCD_OP_DELETE,
	CL_ETCD_OP_RANGE,
};

/* One op of a txn branch: PUT r.key = value (lease), DELETE r, RANGE r. etcd refuses a
 * txn whose branch writes one key twice (-EINVAL). */
struct cl_etcd_op {
	enum cl_etcd_op_type type;
	struct cl_etcd_range r;
	const void *value;
	size_t value_len;
	int64_t lease;
};

struct cl_etcd_txn {
	const struct cl_etcd_cmp *cmp; /* all must hold for `then` to run, else `els` */
	size_t n_cmp;
	const struct cl_etcd_op *then;
	size_t n_then;
	const struct cl_etcd_op *els;
	size_t n_els;
};

struct cl_etcd_op_result {
	enum cl_etcd_op_type type;
	int64_t deleted;        /* DELETE: keys deleted */
	struct cl_etcd_kvs kvs; /* RANGE: the keys read */
};

struct cl_etcd_txn_result {
	bool succeeded;               /* the compares held and `then` ran; else `els` ran */
	int64_t revision;             /* the store's revision after the txn */
	struct cl_etcd_op_result *op; /* one per op of the branch that ran, in order */
	size_t n_op;
};

/*
 * Run a transaction: the compares, then one branch, atomically. A failed compare is not
 * an error: 0 with res->succeeded false. res may be NULL when no result is needed.
 * Release res with cl_etcd_txn_result_fini.
 */
int cl_etcd_txn(struct cl_etcd *c, const struct cl_etcd_txn *txn, struct cl_etcd_txn_result *res,
                unsigned timeout_ms);

void cl_etcd_txn_result_fini(struct cl_etcd_txn_result *res);

/* ------------------------------------------------------------------ leases */

/* Grant a lease of ttl_s seconds (etcd raises tiny TTLs to its minimum, about 1.5 times
 * its election timeout). *id gets its ID, *granted_ttl_s (may be NULL) the TTL granted. */
int cl_etcd_lease_grant(struct cl_etcd *c, int64_t ttl_s, int64_t *id, int64_t *granted_ttl_s,
                        unsigned timeout_ms);

/*
 * A lease of ttl_s seconds shared by this client's callers and never renewed: granted on
 * first use and again once the last one is older than renew_s (< ttl_s), so a key put under
 * it lives between ttl_s - renew_s and ttl_s seconds. For marks that must outlast anything
 * still in flight, then go by themselves. 0 (*id set) or the grant's error. Any thread.
 */
int cl_etcd_lease_shared(struct cl_etcd *c, int64_t ttl_s, int64_t renew_s, int64_t *id,
                         unsigned timeout_ms);

/* Revoke a lease: its keys are deleted in the same step. ZC_E(ZC_NO_KEY) if it is gone already. */
int cl_etcd_lease_revoke(struct cl_etcd *c, int64_t id, unsigned timeout_ms);

struct cl_etcd_keepalive;

/* Called once, on the keepalive's own thread, when the lease is lost: err ZC_E(ZC_NO_KEY) when
 * etcd says the lease expired or was revoked, else the error of the last renewal (no
 * renewal succeeded for a whole TTL, so etcd has let it expire or will at any moment).
 * The thread ends after the callback; the callback must not call _stop itself. */
typedef void (*cl_etcd_lease_lost_cb)(void *arg, int64_t id, int err);

/*
 * Keep lease id (granted with ttl_s) alive from a thread of its own, renewing every
 * ttl_s/3 seconds (and every half second while renewals fail, over the endpoints in
 * turn) until _stop or until the lease is lost (lost_cb). Returns 0 and *out, or -EINVAL,
 * -ENOMEM, -EAGAIN (no thread).
 */
int cl_etcd_keepalive_start(struct cl_etcd *c, int64_t id, int64_t ttl_s,
                            cl_etcd_lease_lost_cb lost_cb, void *arg,
                            struct cl_etcd_keepalive **out);

/* Stop renewing (the lease itself stays until it expires or is revoked) and free ka;
 * returns after the thread has ended, so no callback runs after it. NULL: no-op. */
void cl_etcd_keepalive_stop(struct cl_etcd_keepalive *ka);

#endif
