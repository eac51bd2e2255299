/*
 * One drive: an io_uring ring owned by one thread. Other threads hand it struct dn_io
 * through a locked list and an eventfd whose read is itself an SQE on the ring, so the
 * thread sleeps in one place for both new work and completions (io_uring_submit_and_wait, or
 * poll(2) on the ring when nothing is in flight).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "dn_drive.h"

const double dn_hist_bounds_s[DN_HIST_BUCKETS] = { 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005,
	                                           0.01,   0.025,   0.05,   0.1,   0.25,   1.0 };

#define EFD_TAG ((void *)1)

static bool
probe_direct(const char *root)
{
	char path[PATH_MAX];
	void *buf = NULL;
	bool ok = false;
	int fd;

	snprintf(path, sizeof(path), "%s/.direct-probe", root);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT | O_CLOEXEC, 0644);
	if (fd < 0)
		return false;
	if (posix_memalign(&buf, 4096, 4096) == 0) {
		memset(buf, 0, 4096);
		ok = pwrite(fd, buf, 4096, 0) == 4096;
		free(buf);
	}
	close(fd);
	unlink(path);
	return ok;
}

static void
prep_io(struct dn_drive *d, struct dn_io *io)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&d->ring);

	/* The ring has twice qd entries and we submit before exceeding qd: never NULL. */
#ifdef ZC_FAULTS
	/* test builds: a delay sleeps here, on the ring thread; an error is the completion's */
	io->fault_err = 0;
	if (io->op == DN_IO_WRITEV || io->op == DN_IO_WRITE_FIXED) {
		int f = ZC_FAULT_IDX(ZC_FP_DRIVE_WRITE, d->idx, 0);

		io->fault_err = f < 0 ? f : 0;
	}
#endif
	switch (io->op) {
	case DN_IO_WRITEV:
		io_uring_prep_writev(sqe, io->file->slot, io->iov, io->niov, io->off);
		break;
	case DN_IO_WRITE_FIXED:
		if (d->fixed_ok)
			io_uring_prep_write_fixed(sqe, io->file->slot, io->iov[0].iov_base,
			                          io->iov[0].iov_len, io->off, io->buf_index);
		else
			io_uring_prep_write(sqe, io->file->slot, io->iov[0].iov_base,
			                    io->iov[0].iov_len, io->off);
		break;
	case DN_IO_FSYNC:
		io_uring_prep_fsync(sqe, io->file->slot, IORING_FSYNC_DATASYNC);
		break;
	case DN_IO_FSYNC_DIR:
		io_uring_prep_fsync(sqe, io->file->slot, 0);
		break;
	case DN_IO_READ:
		io_uring_prep_read(sqe, io->file->slot, io->iov[0].iov_base,
		                   (unsigned)io->iov[0].iov_len, io->off);
		break;
	}
	if (io->dsync) {
		/* The file's one and only write: durable when it completes, as write + fdatasync
		 * would make it, in one request. */
		sqe->rw_flags |= RWF_DSYNC;
		atomic_fetch_add_explicit(&d->dsync_writes, 1, memory_order_relaxed);
	} else if (io->op == DN_IO_FSYNC) {
		atomic_fetch_add_explicit(&d->file_syncs, 1, memory_order_relaxed);
	} else if (io->op == DN_IO_FSYNC_DIR) {
		atomic_fetch_add_explicit(&d->dir_syncs, 1, memory_order_relaxed);
	}
	sqe->flags |= IOSQE_FIXED_FILE;
	io_uring_sqe_set_data(sqe, io);
	d->inflight++;
	if (io->op == DN_IO_WRITEV || io->op == DN_IO_WRITE_FIXED)
		atomic_fetch_add(&d->writes_inflight, 1);
}

static void
complete_io(struct dn_drive *d, struct dn_io *io, int res)
{
	io->res = res;
	d->inflight--;
	if (io->op == DN_IO_WRITEV || io->op == DN_IO_WRITE_FIXED) {
#ifdef ZC_FAULTS
		if (io->fault_err)
			res = io->fault_err; /* "drive.write": as a dying disk */
#endif
		atomic_fetch_sub(&d->writes_inflight, 1);
		if (res > 0)
			atomic_fetch_add(&d->write_bytes, (uint64_t)res);
		io->res = res;
		if (res >= 0 && (size_t)res != io->len)
			io->res = -ENOSPC; /* a short write to a regular file: the fs is full */
		if (d->o.on_write_done)
			d->o.on_write_done(d, zc_now_ns() - io->t_enq);
	}
	if (io->op == DN_IO_READ && res > 0)
		ZC_MEM_DEFINED(io->iov[0].iov_base, (size_t)res);
	if (io->op == DN_IO_READ && res >= 0 && (size_t)res != io->len)
		io->res = -ENODATA; /* a short cell file: this cell is bad, the drive may be fine */
	if (io->res == -ENOSPC && io->op != DN_IO_READ) {
		dn_drive_mark_full(d); /* full is not broken: writable again once space frees */
	} else if (io->res < 0 && io->res != -ENODATA && dn_drive_ok(d)) {
		ZC_ERR("drive", "drive=%u op=%d err=%s: marking failed", d->idx, io->op,
		       strerror(-io->res));
		atomic_store(&d->state, DN_DRIVE_FAILED);
	}
	io->cb(io);
}

void
dn_drive_mark_full(struct dn_drive *d)
{
	int ok = DN_DRIVE_OK;

	atomic_store(&d->full_since_ns, zc_now_ns());
	if (atomic_compare_exchange_strong(&d->state, &ok, DN_DRIVE_FULL))
		ZC_WARN("drive",
		        "drive=%u root=%s ENOSPC: marked full, no new cells until it has "
		        "room",
		        d->idx, d->root);
}

bool
dn_drive_reprobe(struct dn_drive *d)
{
	const struct dn_drive_opts *o = &d->o;
	uint64_t now = zc_now_ns(), since = atomic_load(&d->full_since_ns);
	uint64_t need = o->full_need, avail;
	int full = DN_DRIVE_FULL;
	struct statvfs sv;

	/* One prober per interval: whoever moves the stamp does the statvfs. */
	if (now - since < o->full_probe_ns ||
	    !atomic_compare_exchange_strong(&d->full_since_ns, &since, now))
		return atomic_load(&d->state) == DN_DRIVE_OK;
	if (statvfs(d->root, &sv) < 0)
		return false;
	avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	if (avail < need)
		return false;
	if (atomic_compare_exchange_strong(&d->state, &full, DN_DRIVE_OK))
		ZC_INFO("drive", "drive=%u root=%s has room again (%llu bytes free): writable",
		        d->idx, d->root, (unsigned long long)avail);
	return atomic_load(&d->state) == DN_DRIVE_OK;
}

static void *
drive_main(void *arg)
{
	struct dn_drive *d = arg;
	struct dn_io *head = NULL, *tail = NULL;
	bool efd_armed = false;

	for (;;) {
		struct io_uring_cqe *cqe;
		unsigned seen = 0, h;
		bool stop;

		if (!efd_armed) {
			struct io_uring_sqe *sqe = io_uring_get_sqe(&d->ring);

			io_uring_prep_read(sqe, d->efd, &d->efd_val, sizeof(d->efd_val), 0);
			io_uring_sqe_set_data(sqe, EFD_TAG);
			efd_armed = true;
		}
		pthread_mutex_lock(&d->qlock);
		if (d->qhead) {
			if (tail)
				tail->next = d->qhead;
			else
				head = d->qhead;
			tail = d->qtail;
			d->qhead = d->qtail = NULL;
		}
		stop = d->stop;
		pthread_mutex_unlock(&d->qlock);
		while (head && d->inflight < d->qd) {
			struct dn_io *io = head;

			head = io->next;
			if (!head)
				tail = NULL;
			prep_io(d, io);
		}
		if (stop && !head && d->inflight == 0)
			break;
		if (d->inflight == 0) {
			/* Idle: sleep in poll(2) on the ring, not in io_uring_enter. The wake-up is
			 * the same (the armed eventfd read posts a CQE), but valgrind 3.19 treats
			 * io_uring_enter as a call that never blocks and holds its global lock
			 * across it, so an idle drive thread starved every other thread. */
			struct pollfd pfd = { .fd = d->ring.ring_fd, .events = POLLIN };

			io_uring_submit(&d->ring);
			if (!io_uring_cq_ready(&d->ring) && poll(&pfd, 1, -1) < 0 && errno != EINTR)
				ZC_ERR("drive", "drive=%u poll failed err=%s", d->idx,
				       strerror(errno));
		} else {
			io_uring_submit_and_wait(&d->ring, 1);
		}
		io_uring_for_each_cqe(&d->ring, h, cqe) {
			void *data = io_uring_cqe_get_data(cqe);

			seen++;
			if (data == EFD_TAG)
				efd_armed = false;
			else
				complete_io(d, data, cqe->res);
		}
		io_uring_cq_advance(&d->ring, seen);
	}
	return NULL;
}

void
dn_drive_submit(struct dn_drive *d, struct dn_io *io)
{
	uint64_t one = 1;
	bool was_empty;

	io->next = NULL;
	io->t_enq = zc_now_ns();
	pthread_mutex_lock(&d->qlock);
	was_empty = d->qhead == NULL;
	if (d->qtail)
		d->qtail->next = io;
	else
		d->qhead = io;
	d->qtail = io;
	pthread_mutex_unlock(&d->qlock);
	/*
	 * Wake the thread only for the first io of a batch: it takes the whole list under the
	 * lock, so a non-empty list already has a wakeup on its way.
	 */
	if (was_empty && write(d->efd, &one, sizeof(one)) < 0)
		ZC_ERR("drive", "drive=%u eventfd write failed err=%s", d->idx, strerror(errno));
}

struct dn_io *
dn_io_create_sync(struct dn_file *f, enum dn_io_op op, dn_io_cb cb, void *arg)
{
	struct dn_io *io = calloc(1, sizeof(*io));

	if (!io)
		return NULL;
	io->op = op;
	io->file = f;
	io->cb = cb;
	io->arg = arg;
	io->heap = true;
	return io;
}

int
dn_pool_get(struct dn_drive *d, uint64_t wait_ns)
{
	struct timespec until;
	int idx = -EAGAIN;

	zc_deadline(&until, CLOCK_REALTIME, wait_ns);
	pthread_mutex_lock(&d->plock);
	if (d->pool_top == 0)
		atomic_fetch_add(&d->pool_waits, 1); /* admission should make this rare */
	while (d->pool_top == 0) {
		if (pthread_cond_timedwait(&d->pcond, &d->plock, &until) == ETIMEDOUT)
			break;
	}
	if (d->pool_top > 0)
		idx = d->pool_free[--d->pool_top];
	else
		atomic_fetch_add(&d->pool_timeouts, 1);
	pthread_mutex_unlock(&d->plock);
	return idx;
}

void
dn_pool_put(struct dn_drive *d, int index)
{
	pthread_mutex_lock(&d->plock);
	d->pool_free[d->pool_top++] = index;
	pthread_cond_signal(&d->pcond);
	pthread_mutex_unlock(&d->plock);
}

static int
file_open(struct dn_drive *d, const char *path, int flags, bool direct, struct dn_file **out)
{
	struct dn_file *f = calloc(1, sizeof(*f));
	int err, slot = -1;

	if (!f)
		return -ENOMEM;
	f->fd = open(path, flags | (direct ? O_DIRECT : 0), 0644);
	if (f->fd < 0) {
		err = -errno;
		goto free_f;
	}
	pthread_mutex_lock(&d->slock);
	for (int i = 0; i < DN_FILE_SLOTS; i++) {
		if (!d->slot_used[i]) {
			d->slot_used[i] = 1;
			slot = i;
			break;
		}
	}
	pthread_mutex_unlock(&d->slock);
	if (slot < 0) {
		err = -EAGAIN;
		goto close_fd;
	}
	/* Registration takes the ring's own lock in the kernel: safe beside the drive thread. */
	err = io_uring_register_files_update(&d->ring, (unsigned)slot, &f->fd, 1);
	if (err < 0)
		goto free_slot;
	f->drive = d;
	f->slot = slot;
	f->direct = direct;
	*out = f;
	return 0;

free_slot:
	pthread_mutex_lock(&d->slock);
	d->slot_used[slot] = 0;
	pthread_mutex_unlock(&d->slock);
close_fd:
	close(f->fd);
free_f:
	free(f);
	return err;
}

int
dn_file_open(struct dn_drive *d, const char *path, bool direct, struct dn_file **out)
{
	return file_open(d, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, direct && d->direct_ok,
	                 out);
}

int
dn_file_open_read(struct dn_drive *d, const char *path, struct dn_file **out)
{
	return file_open(d, path, O_RDONLY | O_CLOEXEC, false, out);
}

int
dn_dir_open(struct dn_drive *d, const char *path, struct dn_file **out)
{
	return file_open(d, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC, false, out);
}

void
dn_file_close(struct dn_file *f)
{
	struct dn_drive *d;
	int none = -1;

	if (!f)
		return;
	d = f->drive;
	io_uring_register_files_update(&d->ring, (unsigned)f->slot, &none, 1);
	pthread_mutex_lock(&d->slock);
	d->slot_used[f->slot] = 0;
	pthread_mutex_unlock(&d->slock);
	close(f->fd);
	free(f);
}

int
dn_drive_init(struct dn_drive *d, const struct dn_drive_opts *o, unsigned idx, const char *root)
{
	struct iovec *iov = NULL;
	char path[PATH_MAX], name[16];
	int err;

	memset(d, 0, sizeof(*d));
	d->o = *o;
	d->store = o->owner;
	d->idx = idx;
	d->efd = -1;
	d->qd = o->queue_depth;
	pthread_mutex_init(&d->qlock, NULL);
	pthread_mutex_init(&d->plock, NULL);
	pthread_cond_init(&d->pcond, NULL);
	pthread_mutex_init(&d->slock, NULL);
	d->root = strdup(root);
	if (!d->root)
		return -ENOMEM;
	if (mkdir(root, 0755) < 0 && errno != EEXIST)
		return -errno;
	snprintf(path, sizeof(path), "%s/data", root);
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -errno;
	d->direct_ok = !o->no_direct && probe_direct(root);
	if (!o->no_direct && !d->direct_ok)
		ZC_INFO("drive", "drive=%u root=%s O_DIRECT unsupported: parity written buffered",
		        idx, root);
	d->efd = eventfd(0, EFD_CLOEXEC);
	if (d->efd < 0)
		return -errno;
	err = io_uring_queue_init(d->qd * 2 + 2, &d->ring, 0);
	if (err < 0)
		return err;
	d->ring_ok = true;
	err = io_uring_register_files_sparse(&d->ring, DN_FILE_SLOTS);
	if (err < 0)
		return err;

	/* The cell pool: cell-sized, 4096-aligned, registered with this ring once. Parity
	 * only, or data cells too in data_direct mode (a stripe then holds k + m of them). */
	d->buf_size = o->cell_size;
	d->pool_n = o->pool_bufs;
	if (posix_memalign((void **)&d->pool_mem, 4096, d->buf_size * d->pool_n))
		return -ENOMEM;
	d->pool_free = calloc(d->pool_n, sizeof(int));
	iov = calloc(d->pool_n, sizeof(*iov));
	if (!d->pool_free || !iov) {
		free(iov);
		return -ENOMEM;
	}
	for (unsigned i = 0; i < d->pool_n; i++) {
		iov[i].iov_base = dn_pool_buf(d, (int)i);
		iov[i].iov_len = d->buf_size;
		d->pool_free[d->pool_top++] = (int)i;
	}
	err = io_uring_register_buffers(&d->ring, iov, d->pool_n);
	free(iov);
	d->fixed_ok = err == 0;
	if (err < 0) /* e.g. RLIMIT_MEMLOCK for a non-root user: same buffers, plain writes */
		ZC_WARN("drive",
		        "drive=%u register_buffers failed err=%s: parity without fixed buffers",
		        idx, strerror(-err));
	err = pthread_create(&d->thread, NULL, drive_main, d);
	if (err)
		return -err;
	snprintf(name, sizeof(name), "dn-drive%u", d->idx);
	pthread_setname_np(d->thread, name); /* profiles and top -H tell the rings apart */
	d->thread_ok = true;
	return 0;
}

void
dn_drive_fini(struct dn_drive *d)
{
	if (d->thread_ok) {
		uint64_t one = 1;

		pthread_mutex_lock(&d->qlock);
		d->stop = true;
		pthread_mutex_unlock(&d->qlock);
		if (write(d->efd, &one, sizeof(one)) < 0)
			ZC_ERR("drive", "drive=%u eventfd write failed", d->idx);
		pthread_join(d->thread, NULL);
	}
	if (d->ring_ok)
		io_uring_queue_exit(&d->ring);
	if (d->efd >= 0)
		close(d->efd);
	free(d->pool_mem);
	free(d->pool_free);
	free(d->root);
	pthread_mutex_destroy(&d->qlock);
	pthread_mutex_destroy(&d->plock);
	pthread_cond_destroy(&d->pcond);
	pthread_mutex_destroy(&d->slock);
}
