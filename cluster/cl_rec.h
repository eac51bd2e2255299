/*
 * cl_rec: the values zest keeps in etcd in cluster mode (cluster/cluster.proto,
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
#ifndef ZEST_CL_REC_H
#define ZEST_CL_REC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CL_REC_MAX_CELLS        32    /* k + m, as EC_MAX_CELLS */
#define CL_REC_MAX_NAME         128   /* bytes of a node name, without the NUL */
#define CL_REC_MAX_PARTS        10000 /* S3's multipart limit */
#define CL_REC_WHY_MAX          160   /* room for a decoder's message */
#define CL_REC_MAX_EXTENT_NODES 1024  /* distinct nodes one extent's groups use */

enum cl_rec_node_state {
	CL_REC_NODE_UP = 1,
	CL_REC_NODE_DRAINING = 2,
};

struct cl_rec_drive {
	unsigned index;
	char *id; /* "<store>/<index>" */
	uint64_t capacity_bytes, free_bytes;
	bool failed;
};

/* /zest/nodes/<name> */
struct cl_rec_node {
	char *name;           /* 1..CL_REC_MAX_NAME bytes of [A-Za-z0-9._-] */
	char *address;        /* host:port */
	uint64_t incarnation; /* non-zero */
	enum cl_rec_node_state state;
	struct cl_rec_drive *drives;
	size_t ndrives;
	uint64_t capacity_bytes, free_bytes;
	uint64_t started_ns;
	char *version;
	char *zone; /* NULL/"": a zone of its own (cl_rec_node_zone) */
};

/* /zest/members/<name> */
struct cl_rec_member {
	char *name;
	char *address;
	uint64_t first_seen_ns, last_seen_ns;
	uint64_t incarnation;
	char **drive_ids;
	size_t ndrive_ids;
};

/* /zest/buckets/<bucket> */
struct cl_rec_bucket {
	uint64_t ctime_ns;
};

struct cl_rec_attr {
	char *name; /* non-empty */
	char *value;
};

struct cl_rec_group {
	uint16_t cell[CL_REC_MAX_CELLS]; /* cell i -> index into the extent's nodes */
	uint32_t missing;                /* bit i: cell i is not on its node */
};

struct cl_rec_extent {
	uint64_t id; /* non-zero */
	uint64_t size;
	unsigned k, m;              /* k >= 1, k + m <= CL_REC_MAX_CELLS */
	uint64_t cell_size;         /* > 0, a multiple of 4096 */
	unsigned stripes_per_group; /* >= 1 */
	char **nodes;               /* distinct node names, at most CL_REC_MAX_EXTENT_NODES */
	size_t nnodes;
	struct cl_rec_group *groups; /* exactly cl_rec_extent_groups() of them */
	size_t ngroups;
};

/* /zest/objects/<bucket>/<key> */
struct cl_rec_object {
	uint64_t size; /* the sum of the extents' sizes */
	char *etag;    /* non-empty */
	uint32_t crc32c;
	uint64_t mtime_ns;
	struct cl_rec_attr *attrs;
	size_t nattrs;
	struct cl_rec_extent *extents;
	size_t nextents;
	char *moved; /* NULL/"": none; else the moved key a Complete wrote naming this record */
};

/* The groups an extent of e->size bytes has: ceil(size / (k * cell_size * stripes)). */
size_t cl_rec_extent_groups(const struct cl_rec_extent *e);

/* The failure domain of a node: its zone, or its name when it registered none. */
const char *cl_rec_node_zone(const struct cl_rec_node *v);

/* A node's placement weight (zc_place_spread): its free bytes above the reserve, 0 when
 * full; a node that reported no capacity (an older writer) weighs CL_REC_WEIGHT_UNKNOWN. */
#define CL_REC_WEIGHT_UNKNOWN (1ull << 40)
uint64_t cl_rec_node_weight(const struct cl_rec_node *v);

/* Is name a valid node name (the rule above)? */
bool cl_rec_node_name_ok(const char *name);

/*
 * Encoders: 0 with *buf (malloc'ed, free() it) and *len, -EINVAL when the struct breaks a
 * rule above (why, if not NULL, says which; cap bytes), or -ENOMEM.
 * Decoders: 0 with *out filled (fini it), -EBADMSG for a value that is not a valid record
 * of that type (why says what is wrong), or -ENOMEM; *out is zeroed on failure.
 */
int cl_rec_node_encode(const struct cl_rec_node *v, uint8_t **buf, size_t *len, char *why,
                       size_t cap);
int cl_rec_node_decode(const void *buf, size_t len, struct cl_rec_node *out, char *why, size_t cap);
void cl_rec_node_fini(struct cl_rec_node *v);

int cl_rec_member_encode(const struct cl_rec_member *v, uint8_t **buf, size_t *len, char *why,
                         size_t cap);
int cl_rec_member_decode(const void *buf, size_t len, struct cl_rec_member *out, char *why,
                         size_t cap);
void cl_rec_member_fini(struct cl_rec_member *v);

int cl_rec_bucket_encode(const struct cl_rec_bucket *v, uint8_t **buf, size_t *len, char *why,
                         size_t cap);
int cl_rec_bucket_decode(const void *buf, size_t len, struct cl_rec_bucket *out, char *why,
                         size_t cap);

int cl_rec_object_encode(const struct cl_rec_object *v, uint8_t **buf, size_t *len, char *why,
                         size_t cap);
int cl_rec_object_decode(const void *buf, size_t len, struct cl_rec_object *out, char *why,
                         size_t cap);
void cl_rec_object_fini(struct cl_rec_object *v);

#endif
