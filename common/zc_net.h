/*
 * zc_net: the one place a "HOST:PORT" flag becomes a listening socket. Used by the
 * gateway's S3 and /metrics ports and the datanode's /metrics port (the datanode's gRPC
 * port is bound by gRPC itself from the same spelling). Any thread.
 */
#ifndef ZEST_ZC_NET_H
#define ZEST_ZC_NET_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Split "HOST:PORT" at the last colon: "127.0.0.1:9000", "[::1]:9000" (brackets
 * dropped), ":9000" (host "": every address). host gets cap bytes, NUL-terminated.
 * Returns 0, or -EINVAL (no colon, port not 0..65535, host too long or badly bracketed).
 */
int zc_hostport_split(const char *spec, char *host, size_t cap, unsigned *port);

/*
 * Bind and listen on HOST:PORT (port 0 picks one) with SO_REUSEADDR; nonblock sets
 * O_NONBLOCK on the socket. Returns the socket (close-on-exec) with the bound port in
 * *bound, or -errno (-EINVAL for a spec that does not parse or resolve).
 */
int zc_listen(const char *spec, int backlog, bool nonblock, unsigned *bound);

#endif
