/* rpc_chan: gRPC channel arguments built in one place (rpc_chan.h). */
#include <stdint.h>

#include "rpc_chan.h"

static void
put(struct rpc_chan_args *a, const char *key, uint64_t v)
{
	grpc_arg *g = &a->arg[a->args.num_args++];

	g->type = GRPC_ARG_INTEGER;
	g->key = (char *)key;
	g->value.integer = v > INT32_MAX ? INT32_MAX : (int)v;
}

static void
put_str(struct rpc_chan_args *a, const char *key, const char *v)
{
	grpc_arg *g = &a->arg[a->args.num_args++];

	g->type = GRPC_ARG_STRING;
	g->key = (char *)key;
	g->value.string = (char *)v;
}

void
rpc_chan_args_init(struct rpc_chan_args *a, const struct rpc_chan_opts *o)
{
	a->args.num_args = 0;
	a->args.args = a->arg;
	if (o->max_message) {
		put(a, GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, o->max_message);
		put(a, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, o->max_message);
	} else if (o->max_recv) {
		put(a, GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, o->max_recv);
	}
	if (o->server) {
		if (o->no_reuseport)
			put(a, GRPC_ARG_ALLOW_REUSEPORT, 0);
		return;
	}
	put(a, GRPC_ARG_ENABLE_RETRIES, 0);
	if (o->peer_name)
		put_str(a, GRPC_SSL_TARGET_NAME_OVERRIDE_ARG, o->peer_name);
	if (o->own_connection)
		put(a, GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
	if (o->reconnect_first_ms)
		put(a, GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, o->reconnect_first_ms);
	if (o->reconnect_max_ms)
		put(a, GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, o->reconnect_max_ms);
	if (o->connect_ms)
		put(a, GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, o->connect_ms);
	if (o->stream_window) {
		put(a, GRPC_ARG_HTTP2_BDP_PROBE, 0);
		put(a, GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, o->stream_window);
	}
}
