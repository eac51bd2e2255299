/* The healer's target order (chl_zone_order, datanode/cluster/dn_cheal_zone.c): a lost cell's
 * new home is tried first in the zone holding fewest of its group's other cells, full nodes
 * last, the rendezvous order kept among equals. */
#include <assert.h>
#include <stdio.h>
#include <string.h>

#include "dn_cheal_internal.h"

#define N 9

static char names[N][8], zones[N][8];
static struct cl_rec_node nodes[N];
static const char *view_names[N];
static char *ext_nodes[N];

/* The first node of order holding no cell of the group (what place_cell tries first). */
static const char *
first_free(const struct cl_members_view *v, const unsigned *order, const struct cl_rec_group *gr,
           unsigned w)
{
	for (size_t i = 0; i < v->n; i++) {
		bool holds = false;

		for (unsigned c = 0; c < w; c++)
			holds |= !strcmp(ext_nodes[gr->cell[c]], v->names[order[i]]);
		if (!holds)
			return v->names[order[i]];
	}
	return NULL;
}

int
main(void)
{
	struct cl_members_view v = { .nodes = nodes, .names = view_names };
	struct cl_rec_extent e = { .id = 1, .k = 4, .m = 2, .nodes = ext_nodes, .nnodes = N };
	/* cells 0..5 on n1 n4 (z0), n2 n5 (z1), n3 n6 (z2); n7 n8 n9 hold none */
	struct cl_rec_group gr = { .cell = { 0, 3, 1, 4, 2, 5 } };
	unsigned order[N], k = 0;

	/* the view without n1 (dead): n2..n9, every zone named, each with space */
	for (unsigned i = 0; i < N; i++) {
		snprintf(names[i], sizeof(names[i]), "n%u", i + 1);
		snprintf(zones[i], sizeof(zones[i]), "z%u", i % 3);
		ext_nodes[i] = names[i];
	}
	for (unsigned i = 1; i < N; i++) {
		nodes[v.n] = (struct cl_rec_node){
			.name = names[i], .zone = zones[i], .capacity_bytes = 100, .free_bytes = 50
		};
		view_names[v.n++] = names[i];
	}
	/* a ranking putting n9, n8 before n7 */
	for (int i = (int)v.n - 1; i >= 0; i--)
		order[k++] = (unsigned)i;
	assert(!strcmp(first_free(&v, order, &gr, 6), "n9"));
	/* cell 0 (n1's, z0) lost: z0 keeps one other cell, z1 and z2 two: n7 first */
	chl_zone_order(&v, &e, &gr, 0, order);
	assert(!strcmp(first_free(&v, order, &gr, 6), "n7"));
	/* cell 2 (n2's, z1) lost: z1 keeps one, so n8 though the ranking has n9 first */
	for (unsigned i = 0; i < v.n; i++)
		order[i] = v.n - 1 - i;
	chl_zone_order(&v, &e, &gr, 2, order);
	assert(!strcmp(first_free(&v, order, &gr, 6), "n8"));
	/* n7 full: not first even for cell 0; the zones of two cells tie, the ranking decides
	 * (n9 before n8), and n7 comes last of all */
	nodes[5].free_bytes = 0; /* n7 */
	for (unsigned i = 0; i < v.n; i++)
		order[i] = v.n - 1 - i;
	chl_zone_order(&v, &e, &gr, 0, order);
	assert(!strcmp(first_free(&v, order, &gr, 6), "n9"));
	assert(!strcmp(v.names[order[v.n - 1]], "n7"));
	/* no zones registered (each node its own): every free node ties, their ranking kept
	 * (this one already puts them before the group's holders) */
	for (unsigned i = 0; i < v.n; i++) {
		nodes[i].zone = NULL;
		nodes[i].free_bytes = 50;
		order[i] = v.n - 1 - i;
	}
	chl_zone_order(&v, &e, &gr, 0, order);
	for (unsigned i = 0; i < v.n; i++)
		assert(order[i] == v.n - 1 - i);
	printf("ok\n");
	return 0;
}
