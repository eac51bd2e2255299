/*
 * The engine's checks at open: every drive folder is the one this store put at its index,
 * and the files a crash left behind (no committed extent owns them, and the layer beside
 * the engine, the cell store, does not claim them through dn_store_side.file_named) are
 * removed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dn_internal.h"

/*
 * Drive identity: <drive>/zest-drive names the store and the drive's index in it, so that a
 * reordered --drive list or a folder from another store is refused instead of misread. A
 * folder without the file (new, or a replaced disk) gets one; in a store that exists it is
 * marked emptied (dn_store.emptied).
 */
int
dn_store_check_identity(struct dn_store *s)
{
	char store[40] = "", line[160], path[PATH_MAX];
	bool have[DN_MAX_DRIVES] = { false }, existed;
	unsigned char rnd[16];

	for (unsigned d = 0; d < s->ndrives; d++) {
		char id[40];
		unsigned idx, of;
		FILE *f;

		snprintf(path, sizeof(path), "%s/zest-drive", s->drives[d].root);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (!fgets(line, sizeof(line), f) ||
		    sscanf(line, "zest-drive v1 store=%32s index=%u of=%u", id, &idx, &of) != 3) {
			fclose(f);
			ZC_ERR("store", "drive=%s: unreadable %s", s->drives[d].root, path);
			return -EINVAL;
		}
		fclose(f);
		if (idx != d) {
			ZC_ERR("store",
			       "drive=%s is drive %u of its store, given as --drive number %u",
			       s->drives[d].root, idx, d);
			return -EINVAL;
		}
		if (store[0] && strcmp(store, id) != 0) {
			ZC_ERR("store", "drive=%s belongs to store %s, not %s", s->drives[d].root,
			       id, store);
			return -EINVAL;
		}
		strcpy(store, id);
		have[d] = true;
	}
	existed = store[0] != '\0';
	if (!existed) {
		if (getentropy(rnd, sizeof(rnd)) < 0)
			return -errno;
		for (unsigned i = 0; i < sizeof(rnd); i++)
			snprintf(store + 2 * i, 3, "%02x", rnd[i]);
	}
	for (unsigned d = 0; d < s->ndrives; d++) {
		char tmp[PATH_MAX + 8];
		int fd, n;

		if (have[d])
			continue;
		if (existed) {
			ZC_WARN("store", "drive=%s has no zest-drive file: taken into store %s as drive "
			        "%u, empty (what it held is lost)", s->drives[d].root, store, d);
			s->emptied |= 1ull << d;
		}
		snprintf(path, sizeof(path), "%s/zest-drive", s->drives[d].root);
		snprintf(tmp, sizeof(tmp), "%s.tmp", path);
		n = snprintf(line, sizeof(line), "zest-drive v1 store=%s index=%u of=%u\n", store,
		             d, s->ndrives);
		fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fd < 0)
			return -errno;
		if (write(fd, line, (size_t)n) != n || fsync(fd) < 0 || rename(tmp, path) < 0) {
			int err = errno ? -errno : -EIO;

			close(fd);
			return err;
		}
		close(fd);
	}
	return 0;
}

/* Is name (no extent's) a file of the layer beside the engine (the cell store)? As
 * dn_store_side.file_named: 1 or -errno keep it, 0 not. */
static int
side_file(struct dn_store *s, unsigned drive, const char *name)
{
	const struct dn_store_side *side = s->o.side;

	return side && side->file_named ? side->file_named(s, drive, name) : 0;
}

/*
 * Remove cell files no committed extent owns and no cell entry names (cluster mode): what
 * a crash left half-written, or between a cell's fdatasync and its entry.
 */
void
dn_store_collect(struct dn_store *s)
{
	unsigned removed = 0, kept = 0;
	bool empty = dn_meta_generation(s->meta) == 0;

	for (unsigned d = 0; d < s->ndrives; d++) {
		char dir[PATH_MAX];
		DIR *top;
		struct dirent *de;

		snprintf(dir, sizeof(dir), "%s/data", s->drives[d].root);
		top = opendir(dir);
		if (!top)
			continue;
		while ((de = readdir(top))) {
			char sub[PATH_MAX + 300];
			DIR *dd;
			struct dirent *fe;

			if (de->d_name[0] == '.')
				continue;
			snprintf(sub, sizeof(sub), "%s/%s", dir, de->d_name);
			dd = opendir(sub);
			if (!dd)
				continue;
			while ((fe = readdir(dd))) {
				char path[PATH_MAX * 2];
				uint64_t id;

				if (fe->d_name[0] == '.')
					continue;
				if (dn_layout_parse(fe->d_name, &id) == 0 && empty) {
					kept++;
					continue;
				}
				if (dn_layout_parse(fe->d_name, &id) == 0 &&
				    (dn_meta_extent_exists(s->meta, id) == 1 ||
				     side_file(s, d, fe->d_name) != 0))
					continue;
				snprintf(path, sizeof(path), "%s/%s", sub, fe->d_name);
				if (unlink(path) != 0)
					continue;
				removed++;
				if (dn_layout_parse(fe->d_name, &id) == 0)
					atomic_fetch_add(&s->cells_swept_open, 1);
			}
			closedir(dd);
		}
		closedir(top);
	}
	if (removed)
		ZC_INFO("store", "removed=%u files of uncommitted writes", removed);
	/*
	 * No metadata at all (every replica lost or new) beside existing cell files: never
	 * sweep those, an operator may still bring a metadata copy back.
	 */
	if (kept)
		ZC_ERR("store", "metadata is empty but drives hold %u cell files: left untouched",
		       kept);
}
