/*
 * dn_write_internal: what the write pipeline (dn_write.c) and its finishing half
 * (dn_commit.c: quorum, fsyncs, batched metadata commits, abort) share. Private to them.
 */
#ifndef ZEST_DN_WRITE_INTERNAL_H
#define ZEST_DN_WRITE_INTERNAL_H

#include "dn_internal.h"

enum phase { PH_WRITE, PH_SYNC };

struct wgroup {
	uint32_t idx;
	uint8_t drives[EC_MAX_CELLS];
	atomic_uint missing;
	atomic_uint full; /* missing cells lost to a full drive (ENOSPC) */
	struct dn_file *files[EC_MAX_CELLS];
	struct zc_chunk_crc cc[EC_MAX_CELLS];
	uint32_t *crcs[EC_MAX_CELLS];
	uint64_t file_off[EC_MAX_CELLS];
	uint32_t created;        /* cells whose file was created (writer thread) */
	uint32_t padded;         /* data_direct: cells whose last write was padded to a block;
	                          * truncated to file_off before their fdatasync */
	uint32_t dsynced;        /* cells written by one RWF_DSYNC write: no fdatasync */
	atomic_long outstanding; /* ios in flight + the writer's bias while current */
	int phase;               /* 0 writing, 1 syncing: changed by whoever drains it */
};

struct dn_write {
	struct dn_store *s;
	char *bucket, *key;
	uint64_t size;
	bool size_known;
	struct ec_codec *codec;
	unsigned k, m, n;
	uint32_t cell, spg, chunk;
	uint64_t id;
	uint64_t written;
	uint32_t crc;
	int err; /* poisoned: first error */
	/* Current position. */
	uint32_t stripe; /* in the current group */
	unsigned dcell;  /* data cell being filled */
	uint32_t fill;   /* bytes in it */
	bool stripe_open;
	struct ec_stripe st;
	int pbuf[EC_MAX_CELLS];
	uint8_t pdrive[EC_MAX_CELLS];
	struct dn_io *pending[EC_MAX_CELLS];
	int dbuf[EC_MAX_CELLS]; /* data_direct: pool buffer of data cell c being filled, or -1 */
	struct wgroup **groups;
	uint32_t ngroups, cap_groups;
	/* Completion. */
	atomic_long outstanding;
	enum phase phase;
	bool aborted;
	atomic_bool doomed; /* aborted or failed: groups skip their fsync */
	bool group_held;    /* the writer still holds the last group's bias */
	bool closing;       /* the final stripe closes at commit: its writes end their files */
	uint8_t drives_used[DN_MAX_DRIVES];
	char *etag;
	struct dn_attr *attrs;
	size_t nattrs;
	bool has_cond; /* cond (its if_match owned) is checked in the commit transaction */
	struct dn_cond cond;
	dn_commit_cb cb;
	void *cb_arg;
	struct dn_job job;
	struct dn_file *dirs[DN_MAX_DRIVES];
	struct dn_claim claim; /* the cell buffers admission reserved; released once drained */
};

void dn_write_release_group(struct dn_write *w);
int dn_write_submit_sync(struct dn_write *w, enum dn_io_op op, struct dn_file *file, void *grp,
                         unsigned cell);
void dn_write_drop_pending(struct dn_write *w, unsigned c);
void dn_write_release_parity(struct dn_write *w);
int dn_write_stripe_close(struct dn_write *w);
void dn_write_unhold(struct dn_write *w);
/* Every io of w is done: its reserved buffers go back to admission (once). */
static inline void
dn_write_unclaim(struct dn_write *w)
{
	dn_admission_release(w->s, &w->claim);
}

#endif
