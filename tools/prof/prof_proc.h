/* zest-prof's process helpers: spawn daemons and tools, read their /proc figures. */
#ifndef ZEST_PROF_PROC_H
#define ZEST_PROF_PROC_H

#include <stdint.h>
#include <sys/types.h>

/* Start argv[0] with argv, stdout and stderr appended to log. Returns the pid or -errno. */
pid_t prof_spawn(char *const *argv, const char *log);

/* Run argv to completion, capturing stdout into out (NUL-terminated, truncated to n).
 * Returns the exit status (0..255), or -errno. */
int prof_run_capture(char *const *argv, char *out, size_t n, const char *log);

/* SIGTERM, wait up to timeout_ms, then SIGKILL. Returns the exit status or -1. */
int prof_stop(pid_t pid, unsigned timeout_ms);

/* User + system CPU seconds the process has used so far. */
double prof_cpu_seconds(pid_t pid);

/* Peak resident set (VmHWM) in MiB. */
double prof_peak_rss_mib(pid_t pid);

/* Wait until http://127.0.0.1:metrics_port/metrics answers: 0, -ECHILD when the process
 * died first, -ETIMEDOUT. */
int prof_wait_ready(pid_t pid, int metrics_port, unsigned timeout_ms);

/* A TCP port on 127.0.0.1 that was free a moment ago. */
int prof_free_port(void);

/* GET http://127.0.0.1:port/path into out; returns bytes or -errno. */
int prof_http_get(int port, const char *path, char *out, size_t n);

/* Sum of every sample of a Prometheus series `name` (any labels) in a /metrics text. */
double prof_metric_sum(const char *text, const char *name);

/* The number after "key": in a JSON text, or NAN. */
double prof_json_number(const char *json, const char *key);

#endif
