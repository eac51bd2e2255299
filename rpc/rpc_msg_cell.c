/*
 * rpc_msg_cell: the cell messages of zest.proto (CellOpen, CellReadRequest, CellsRequest,
 * CellsResult) to and from rpc.h's structs. Metadata only, as in rpc_msg.c.
 */
#include <errno.h>
#include <string.h>

#include "rpc_internal.h"

/* protobuf-c never writes through a string field: sending borrows the caller's. */
static char *
str_out(const char *s)
{
	return (char *)(s ? s : "");
}

void
rpc_msg_cell_id_to_pb(const struct rpc_cell_id *in, Zest__CellId *out)
{
	zest__cell_id__init(out);
	out->extent_id = in->extent;
	out->group = in->group;
	out->cell = in->cell;
}

void
rpc_msg_cell_id_from_pb(const Zest__CellId *in, struct rpc_cell_id *out)
{
	memset(out, 0, sizeof(*out));
	if (!in)
		return; /* absent: extent 0, which every handler refuses */
	out->extent = in->extent_id;
	out->group = in->group;
	out->cell = in->cell;
}

void
rpc_msg_cell_open_to_pb(const struct rpc_cell_open *in, Zest__CellOpen *out, Zest__CellId *id)
{
	zest__cell_open__init(out);
	rpc_msg_cell_id_to_pb(&in->id, id);
	out->id = id;
	out->length = in->length;
	out->ec_k = in->ec_k;
	out->ec_m = in->ec_m;
	out->cell_size = in->cell_size;
	out->stripes_per_group = in->stripes_per_group;
	out->bucket = str_out(in->bucket);
	out->key = str_out(in->key);
}

void
rpc_msg_cell_open_from_pb(const Zest__CellOpen *in, struct rpc_cell_open *out)
{
	rpc_msg_cell_id_from_pb(in->id, &out->id);
	out->length = in->length;
	out->ec_k = in->ec_k;
	out->ec_m = in->ec_m;
	out->cell_size = in->cell_size;
	out->stripes_per_group = in->stripes_per_group;
	out->bucket = in->bucket;
	out->key = in->key;
}

void
rpc_msg_cell_read_req_to_pb(const struct rpc_cell_read_req *in, Zest__CellReadRequest *out,
                            Zest__CellId *id)
{
	zest__cell_read_request__init(out);
	rpc_msg_cell_id_to_pb(&in->id, id);
	out->id = id;
	out->offset = in->offset;
	out->length = in->length;
	out->has_length = in->has_length;
}

void
rpc_msg_cell_read_req_from_pb(const Zest__CellReadRequest *in, struct rpc_cell_read_req *out)
{
	rpc_msg_cell_id_from_pb(in->id, &out->id);
	out->offset = in->offset;
	out->length = in->length;
	out->has_length = in->has_length;
}

int
rpc_msg_cells_req_to_pb(const struct rpc_cells_req *in, Zest__CellsRequest *out,
                        struct rpc_arena *a)
{
	Zest__CellId *v, **pv;

	zest__cells_request__init(out);
	out->touch = in->touch;
	if (!in->n_cells)
		return 0;
	v = rpc_arena_alloc(a, in->n_cells * sizeof(*v));
	pv = rpc_arena_alloc(a, in->n_cells * sizeof(*pv));
	if (!v || !pv)
		return -ENOMEM;
	for (size_t i = 0; i < in->n_cells; i++) {
		rpc_msg_cell_id_to_pb(&in->cells[i], &v[i]);
		pv[i] = &v[i];
	}
	out->cells = pv;
	out->n_cells = in->n_cells;
	return 0;
}

int
rpc_msg_cells_req_from_pb(const Zest__CellsRequest *in, struct rpc_cells_req *out,
                          struct rpc_arena *a)
{
	struct rpc_cell_id *v;

	out->cells = NULL;
	out->n_cells = 0;
	out->touch = in->touch;
	if (!in->n_cells)
		return 0;
	v = rpc_arena_alloc(a, in->n_cells * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < in->n_cells; i++)
		rpc_msg_cell_id_from_pb(in->cells[i], &v[i]);
	out->cells = v;
	out->n_cells = in->n_cells;
	return 0;
}
