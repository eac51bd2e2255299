/*
 * Reading a cell (cluster mode): its entry names the drive, the length and the chunk
 * CRCs; the file is read through that drive's ring a window at a time (a READ SQE into a
 * refcounted buffer, the caller's thread asleep meanwhile, as dn_read.c does), every
 * chunk of the window is checked, then the window's part of the range goes to the
 * callback. No rebuild here: a bad cell is the caller's to read around (the gateway reads
 * parity cells from other nodes instead).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dn_cells.h"
#include "zc.h"
#include "zc_crc.h"

/* Bytes per READ SQE: a few chunks, so a long cell streams instead of arriving at once. */
#define WINDOW_MAX (1u << 20)
/* A retired cell's reads touch its entry at most this often (an LMDB write each). */
#define TOUCH_EVERY_NS 1000000000ull

struct cbuf {
	struct zc_ref ref;
	uint8_t data[];
};

static void
cbuf_release(struct zc_ref *ref)
{
	free(ref);
}

struct waiter {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
};

static void
read_done(struct dn_io *io)
{
	struct waiter *wt = io->arg;

	pthread_mutex_lock(&wt->lock);
	wt->done = true;
	pthread_cond_signal(&wt->cond);
	pthread_mutex_unlock(&wt->lock);
}

/* Read [off, off + len) of f into buf through its ring. Returns 0 or -errno. */
static int
ring_read(struct dn_file *f, uint64_t off, uint8_t *buf, size_t len)
{
	struct waiter wt = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false };
	struct dn_io io;

	memset(&io, 0, sizeof(io));
	io.op = DN_IO_READ;
	io.file = f;
	io.off = off;
	io.iov[0].iov_base = buf;
	io.iov[0].iov_len = len;
	io.niov = 1;
	io.len = len;
	io.cb = read_done;
	io.arg = &wt;
	dn_drive_submit(f->drive, &io);
	pthread_mutex_lock(&wt.lock);
	while (!wt.done)
		pthread_cond_wait(&wt.cond, &wt.lock);
	pthread_mutex_unlock(&wt.lock);
	pthread_mutex_destroy(&wt.lock);
	pthread_cond_destroy(&wt.cond);
	return io.res < 0 ? io.res : 0;
}

int
dn_cell_read(struct dn_store *s, struct dn_cell_id id, uint64_t offset, uint64_t length,
             bool has_length, dn_read_cb cb, void *arg)
{
	struct dn_cell_rec rec;
	struct dn_file *f = NULL;
	char path[PATH_MAX];
	uint64_t end, cend, at;
	size_t window;
	int err;

	if (!s || !cb)
		return -EINVAL;
	err = dn_meta_cell_get(s->meta, id, &rec);
	if (err)
		return err;
	if (rec.retired) {
		struct timespec ts;
		uint64_t now;

		clock_gettime(CLOCK_REALTIME, &ts);
		now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
		/* A GET of a replaced version is still reading it: the grace of the extent's
		 * retired cells on this node starts again (the GET will want the others
		 * later). Best effort: a failed touch only shortens the grace. */
		if (now - rec.touched_ns >= TOUCH_EVERY_NS)
			(void)dn_meta_cell_touch_retired(s->meta, id.extent, now);
	}
	if (offset > rec.length || (has_length && length > rec.length - offset)) {
		err = -EINVAL;
		goto out;
	}
	end = has_length ? offset + length : rec.length;
	if (offset == end)
		goto out; /* nothing to read: not even the file is needed */
	if (rec.drive >= s->ndrives || !dn_drive_ok(&s->drives[rec.drive])) {
		err = -EIO;
		goto out;
	}
	err = dn_layout_path(s->drives[rec.drive].root, id.extent, id.group, id.cell, path,
	                     sizeof(path));
	if (!err)
		err = dn_file_open_read(&s->drives[rec.drive], path, &f);
	if (err) {
		/* An entry without its file: the cell is lost, the drive may be fine. */
		err = err == -ENOENT ? -EBADMSG : err;
		goto out;
	}
	window = WINDOW_MAX - WINDOW_MAX % rec.chunk;
	if (window == 0)
		window = rec.chunk;
	/* Whole chunks over the range, and no more: a bad chunk outside it is not this read's. */
	cend = end + (rec.chunk - end % rec.chunk) % rec.chunk;
	if (cend > rec.length)
		cend = rec.length;
	for (at = offset - offset % rec.chunk; at < end && !err;) {
		uint64_t wend = at + window < cend ? at + window : cend;
		size_t len = (size_t)(wend - at);
		struct cbuf *b = malloc(sizeof(*b) + len);
		struct zc_seg seg;
		uint64_t from;

		if (!b) {
			err = -ENOMEM;
			break;
		}
		zc_ref_init(&b->ref, cbuf_release);
		err = ring_read(f, at, b->data, len);
		if (err == -ENODATA)
			err = -EBADMSG; /* a short file: this cell is bad */
		for (uint64_t c = at; !err && c < wend; c += rec.chunk) {
			size_t n = wend - c < rec.chunk ? (size_t)(wend - c) : rec.chunk;

			if (zc_crc32c(0, b->data + (c - at), n) != rec.crcs[c / rec.chunk]) {
				ZC_WARN("cell",
				        "id=%016" PRIx64 ".%" PRIu32 ".%u chunk=%" PRIu64
				        " crc mismatch",
				        id.extent, id.group, id.cell, c / rec.chunk);
				atomic_fetch_add(&s->drives[rec.drive].crc_mismatches, 1);
				err = -EBADMSG;
			}
		}
		from = at > offset ? at : offset;
		if (!err) {
			seg = (struct zc_seg){ b->data + (from - at),
				               (size_t)((wend < end ? wend : end) - from),
				               &b->ref };
			err = cb(arg, from, &seg);
		}
		zc_ref_put(&b->ref);
		at = wend;
	}
	dn_file_close(f);
out:
	dn_cell_rec_fini(&rec);
	return err;
}
