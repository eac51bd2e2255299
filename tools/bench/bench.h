/* zest-bench: one program, one subcommand per thing measured (ec, grpc, s3). */
#ifndef ZEST_BENCH_H
#define ZEST_BENCH_H

#include <stdio.h>

/* Each subcommand gets argv with argv[0] = its own name; returns the exit code. */
int bench_adm_main(int argc, char **argv);
int bench_ec_main(int argc, char **argv);
int bench_etcd_main(int argc, char **argv);
int bench_grpc_main(int argc, char **argv);
int bench_s3_main(int argc, char **argv);
int bench_sums_main(int argc, char **argv);

/* Print the machine and build facts every benchmark report starts with. */
void bench_print_context(FILE *out, int argc, char **argv);

#endif
