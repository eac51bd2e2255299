/*
 * cl_index: the keys zest keeps in etcd beside the object records, in the same Txns as
 * the records (cl_meta.h): the extent index, which finds the record that names an extent
 * (the collector's and the healer's question), and the heal to-do keys, which name the
 * records with cells marked missing or a group with two cells on one node (the healers
 * read these instead of every record).
 *
 * Threads: any, any number at once; the etcd client is borrowed for the call. Errors as
 * cl_meta.h.
 */
#ifndef ZEST_CL_INDEX_H
#define ZEST_CL_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cl_etcd.h"
#include "cl_rec.h"

/* ---- the extent index */

/*
 * /zest/extents/<16 hex id> holds the etcd key of the record that names the extent
 * (/zest/objects/<bucket>/<key>), kept in the same Txns as the records: commit puts the
 * new record's extents' keys and deletes those of the record it replaced, compose points
 * the parts' extents at the target (an upload's compose leaves them naming the parts and
 * writes one moved key instead), delete removes the record's. The collector (dn_cgc.h)
 * finds a cell's record through it.
 */

/*
 * The record that names extent id, as the index says: 0 with *out (fini it), *record_key
 * (the etcd key the index holds; free() it; may be NULL) and *mod_revision (the record's;
 * may be NULL). When that record is gone or lacks the extent and its moved key
 * (cl_meta_moved_key: a completed upload's part) names a record that has the extent,
 * that record is the answer (*record_key its key), read at the same revision.
 * ZC_E(ZC_NO_KEY) when the index has no key for id (*record_key NULL), or when the key it
 * names holds no record (*record_key set, *mod_revision 0: a dangling index key). The
 * record is read at the index read's revision (one snapshot). The caller checks that *out
 * has the extent: an index key left by a Txn etcd refused in full (see cl_meta_commit)
 * names a record that no longer does. -EBADMSG when the record does not decode
 * (*record_key set), or an etcd error.
 */
int cl_meta_extent_record(struct cl_etcd *c, uint64_t id, bool serializable,
                          struct cl_rec_object *out, char **record_key, int64_t *mod_revision,
                          unsigned timeout_ms);

/*
 * Delete the dangling index key of id: only if it still holds record_key and that record's
 * mod_revision is still record_mod_revision (0: absent), which the caller found not to
 * name the extent. 1 deleted, 0 something changed (nothing deleted), or an etcd error.
 */
int cl_meta_extent_unlink(struct cl_etcd *c, uint64_t id, const char *record_key,
                          int64_t record_mod_revision, unsigned timeout_ms);

/*
 * Before a collector deletes the pending cells of extent id that no record names, it puts
 * the fence /zest/fences/<16 hex id>, only while the index has no key for id (no commit
 * named the extent): every commit Txn compares its extents' fences absent, so a commit
 * that reaches etcd after the deletion (sent before its deadline, held in a partitioned
 * connection or retried by the client) fails instead of naming cells that are gone.
 * 1 fenced (or fenced already), 0 the index has a key for id (read the record again), or
 * an etcd error. Fences stay: one small key per abandoned extent.
 */
int cl_meta_extent_fence(struct cl_etcd *c, uint64_t id, unsigned timeout_ms);

/* The fence key of extent id into buf (CL_META_EXTENT_KEY_CAP bytes): its length. */
int cl_meta_fence_key(uint64_t id, char *buf, size_t cap);

/* ---- heal to-do keys */

/*
 * /zest/heal/<bucket>/<key> says that the record /zest/objects/<bucket>/<key> needs a
 * healer: cells marked missing, or a **doubled** group (two of its cells on one node: a
 * write while fewer than k + m nodes were live), so the healers (datanode/dn_cheal.h)
 * read these keys instead of every record. Written in the Txn that sets a missing bit or
 * writes a doubled group (a commit short of some cells or of live nodes, the healer's and
 * the scrubber's marking: dn_cheal_mark_missing), deleted in the healer's Txn that clears
 * the last missing bit and moves the last doubled cell; a key whose record needs nothing
 * any more (an overwrite, a delete) is deleted by the healer that reads it. The value
 * lists the extents with missing bits or doubled groups (16 hex digits each,
 * comma-separated, at most CL_META_HEAL_IDS_MAX), so a healer finds them again through
 * the extent index when a compose moved them into another record.
 */
#define CL_META_HEAL_IDS_MAX   64
#define CL_META_HEAL_VALUE_CAP (CL_META_HEAL_IDS_MAX * 17)

/* The to-do key of the record key /zest/objects/<bucket>/<key> (record_len bytes) into buf
 * (cap bytes): its length, or -EINVAL (not a record key) / -ENAMETOOLONG. */
int cl_meta_heal_key(const char *record_key, size_t record_len, char *buf, size_t cap);

/* Does group gr of extent e name one node for two of its cells (doubled)? Losing that
 * node costs the group two cells; with k + m live nodes a healer spreads it out. */
bool cl_meta_heal_group_doubled(const struct cl_rec_extent *e, const struct cl_rec_group *gr);

/* The to-do value of rec into buf (CL_META_HEAL_VALUE_CAP bytes): its length, 0 when no
 * cell of rec is marked missing and no group is doubled (the record needs no to-do key). */
size_t cl_meta_heal_value(const struct cl_rec_object *rec, char *buf);

/* The extent ids of a to-do value: how many went into ids[0..cap) (malformed ones are
 * skipped). */
size_t cl_meta_heal_ids(const void *value, size_t len, uint64_t *ids, size_t cap);

#endif
