/*
 * rpc_cluster: the values zest keeps in etcd in cluster mode (rpc/cluster.proto,
 * docs/cluster.md "Keys in etcd"), as zest's own structs, with their encoders and strict
 * decoders. No protobuf-c type crosses this header.
 *
 * Decoding checks every field a reader relies on (names, schemes, group counts against the
 * size, cell indices, part numbers) and refuses the value with -EBADMSG and a message
 * naming the field; an unknown field (a newer writer) is skipped. Encoding checks the same
 * rules (-EINVAL), so no process writes a value another would refuse.
 *
 * Ownership: a decoded struct owns its strings and arrays; release it with its _fini
 * (which also accepts a zeroed struct, and leaves one). Encoders allocate *buf (free()).
 * Structs filled by the caller for encoding are only read. Pure functions, any thread.
 */
#ifndef ZEST_RPC_CLUSTER_H
#define ZEST_RPC_CLUSTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RPC_CL_MAX_CELLS        32    /* k + m, as EC_MAX_CELLS */
#define RPC_CL_MAX_NAME         128   /* bytes of a node name, without the NUL */
#define RPC_CL_MAX_PARTS        10000 /* S3's multipart limit */
#define RPC_CL_WHY_MAX          160   /* room for a decoder's message */
#define RPC_CL_MAX_EXTENT_NODES 1024  /* distinct nodes one extent's groups use */

enum rpc_cl_node_state {
	RPC_CL_NODE_UP = 1,
	RPC_CL_NODE_DRAINING = 2,
};

struct rpc_cl_drive {
	unsigned index;
	char *id; /* "<store>/<index>" */
	uint64_t capacity_bytes, free_bytes;
	bool failed;
};

/* /zest/nodes/<name> */
struct rpc_cl_node {
	char *name;           /* 1..RPC_CL_MAX_NAME bytes of [A-Za-z0-9._-] */
	char *address;        /* host:port */
	uint64_t incarnation; /* non-zero */
	enum rpc_cl_node_state state;
	struct rpc_cl_drive *drives;
	size_t ndrives;
	uint64_t capacity_bytes, free_bytes;
	uint64_t started_ns;
	char *version;
};

/* /zest/members/<name> */
struct rpc_cl_member {
	char *name;
	char *address;
	uint64_t first_seen_ns, last_seen_ns;
	uint64_t incarnation;
	char **drive_ids;
	size_t ndrive_ids;
};

/* /zest/buckets/<bucket> */
struct rpc_cl_bucket {
	uint64_t ctime_ns;
};

struct rpc_cl_attr {
	char *name; /* non-empty */
	char *value;
};

struct rpc_cl_group {
	uint16_t cell[RPC_CL_MAX_CELLS]; /* cell i -> index into the extent's nodes */
	uint32_t missing;                /* bit i: cell i is not on its node */
};

struct rpc_cl_extent {
	uint64_t id; /* non-zero */
	uint64_t size;
	unsigned k, m;              /* k >= 1, k + m <= RPC_CL_MAX_CELLS */
	uint64_t cell_size;         /* > 0, a multiple of 4096 */
	unsigned stripes_per_group; /* >= 1 */
	char **nodes;               /* distinct node names, at most RPC_CL_MAX_EXTENT_NODES */
	size_t nnodes;
	struct rpc_cl_group *groups; /* exactly rpc_cl_extent_groups() of them */
	size_t ngroups;
};

/* /zest/objects/<bucket>/<key> */
struct rpc_cl_object {
	uint64_t size; /* the sum of the extents' sizes */
	char *etag;    /* non-empty */
	uint32_t crc32c;
	uint64_t mtime_ns;
	struct rpc_cl_attr *attrs;
	size_t nattrs;
	struct rpc_cl_extent *extents;
	size_t nextents;
	char *moved; /* NULL/"": none; else the moved key a Complete wrote naming this record */
};

struct rpc_cl_part {
	unsigned number; /* 1..RPC_CL_MAX_PARTS */
	uint64_t size;   /* equals extent.size */
	char *etag;      /* non-empty */
	char *checksum;
	uint64_t mtime_ns;
	struct rpc_cl_extent extent;
};

/* /zest/uploads/<bucket>/<upload-id> */
struct rpc_cl_upload {
	char *key; /* non-empty */
	uint64_t initiated_ns;
	struct rpc_cl_attr *attrs;
	size_t nattrs;
	char *checksum_algorithm;  /* "" or CRC32, CRC32C, SHA1, SHA256, CRC64NVME */
	char *checksum_type;       /* "", COMPOSITE or FULL_OBJECT */
	struct rpc_cl_part *parts; /* by number, strictly increasing */
	size_t nparts;
};

/* The groups an extent of e->size bytes has: ceil(size / (k * cell_size * stripes)). */
size_t rpc_cl_extent_groups(const struct rpc_cl_extent *e);

/* Is name a valid node name (the rule above)? */
bool rpc_cl_node_name_ok(const char *name);

/*
 * Encoders: 0 with *buf (malloc'ed, free() it) and *len, -EINVAL when the struct breaks a
 * rule above (why, if not NULL, says which; cap bytes), or -ENOMEM.
 * Decoders: 0 with *out filled (fini it), -EBADMSG for a value that is not a valid record
 * of that type (why says what is wrong), or -ENOMEM; *out is zeroed on failure.
 */
int rpc_cl_node_encode(const struct rpc_cl_node *v, uint8_t **buf, size_t *len, char *why,
                       size_t cap);
int rpc_cl_node_decode(const void *buf, size_t len, struct rpc_cl_node *out, char *why, size_t cap);
void rpc_cl_node_fini(struct rpc_cl_node *v);

int rpc_cl_member_encode(const struct rpc_cl_member *v, uint8_t **buf, size_t *len, char *why,
                         size_t cap);
int rpc_cl_member_decode(const void *buf, size_t len, struct rpc_cl_member *out, char *why,
                         size_t cap);
void rpc_cl_member_fini(struct rpc_cl_member *v);

int rpc_cl_bucket_encode(const struct rpc_cl_bucket *v, uint8_t **buf, size_t *len, char *why,
                         size_t cap);
int rpc_cl_bucket_decode(const void *buf, size_t len, struct rpc_cl_bucket *out, char *why,
                         size_t cap);

int rpc_cl_object_encode(const struct rpc_cl_object *v, uint8_t **buf, size_t *len, char *why,
                         size_t cap);
int rpc_cl_object_decode(const void *buf, size_t len, struct rpc_cl_object *out, char *why,
                         size_t cap);
void rpc_cl_object_fini(struct rpc_cl_object *v);

int rpc_cl_upload_encode(const struct rpc_cl_upload *v, uint8_t **buf, size_t *len, char *why,
                         size_t cap);
int rpc_cl_upload_decode(const void *buf, size_t len, struct rpc_cl_upload *out, char *why,
                         size_t cap);
void rpc_cl_upload_fini(struct rpc_cl_upload *v);

#endif
