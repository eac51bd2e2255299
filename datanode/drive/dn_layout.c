/*
 * On-disk layout: an extent (what one write stored) is cut into block groups of
 * stripes_per_group stripes; in a group, cell file c holds cell c of every stripe back to
 * back. Names come from the extent id only, never from a bucket or key:
 *   <drive>/data/<id % 256 as 2 hex>/<id as 16 hex>.<group>.<cell>
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "dn_drive.h"

uint32_t
dn_geom_ngroups(const struct dn_geom *g)
{
	uint64_t gb = dn_geom_group_bytes(g);

	return (uint32_t)((g->size + gb - 1) / gb);
}

uint32_t
dn_geom_nstripes(const struct dn_geom *g, uint32_t group)
{
	uint64_t gb = dn_geom_group_bytes(g), sb = dn_geom_stripe_bytes(g);
	uint64_t start = (uint64_t)group * gb, gl;

	if (start >= g->size)
		return 0;
	gl = g->size - start < gb ? g->size - start : gb;
	return (uint32_t)((gl + sb - 1) / sb);
}

uint32_t
dn_geom_cell_len(const struct dn_geom *g, uint32_t group, uint32_t stripe, unsigned j)
{
	uint64_t off;

	if (j >= g->k) {
		if (!g->short_parity)
			return stripe < dn_geom_nstripes(g, group) ? g->cell : 0;
		j = 0; /* the longest data cell: parity past it is zero, never stored */
	}
	off = (uint64_t)group * dn_geom_group_bytes(g) +
	      (uint64_t)stripe * dn_geom_stripe_bytes(g) + (uint64_t)j * g->cell;
	if (off >= g->size)
		return 0;
	return g->size - off < g->cell ? (uint32_t)(g->size - off) : g->cell;
}

uint64_t
dn_geom_file_len(const struct dn_geom *g, uint32_t group, unsigned c)
{
	uint32_t n = dn_geom_nstripes(g, group);

	if (n == 0)
		return 0;
	return (uint64_t)(n - 1) * g->cell + dn_geom_cell_len(g, group, n - 1, c);
}

int
dn_layout_path(const char *root, uint64_t id, uint32_t group, unsigned cell, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s/data/%02x/%016" PRIx64 ".%" PRIu32 ".%u", root,
	                 (unsigned)(id & 0xff), id, group, cell);

	return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int
dn_layout_mkdirs(const char *root, uint64_t id)
{
	char path[4096];

	int fd;

	snprintf(path, sizeof(path), "%s/data/%02x", root, (unsigned)(id & 0xff));
	if (mkdir(path, 0755) == 0) {
		/* A new subfolder (at most 256 per drive, ever): make its name durable now. */
		snprintf(path, sizeof(path), "%s/data", root);
		fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		if (fsync(fd) < 0) {
			int err = -errno;

			close(fd);
			return err;
		}
		close(fd);
	} else if (errno != EEXIST) {
		return -errno;
	}
	return 0;
}

int
dn_layout_parse(const char *name, uint64_t *id)
{
	const char *p = name + 17;
	char *end;

	/* Exactly <16 hex>.<digits>.<digits>: anything else (a .heal temp) is not a cell. */
	if (strlen(name) < 20 || name[16] != '.')
		return -EINVAL;
	*id = strtoull(name, &end, 16);
	if (end != name + 16)
		return -EINVAL;
	for (int part = 0; part < 2; part++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		while (*p >= '0' && *p <= '9')
			p++;
		if (part == 0 && *p++ != '.')
			return -EINVAL;
	}
	return *p == 0 ? 0 : -EINVAL;
}
