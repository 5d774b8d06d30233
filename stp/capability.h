/*
 * capability.h: the capability C = alpha * L + beta * M that MQTT-ST uses to elect the root,
 * where L is CPU speed (MHz summed over logical CPUs, i.e. MHz times cores) and M is RAM in
 * MiB. The parsers take the text of /proc/cpuinfo and /proc/meminfo so tests can feed sample
 * files; stp_capability_read_host is the only function that touches the file system.
 * Nothing here belongs to the pure spanning-tree core: the core receives C as a number.
 */
#ifndef ARBOR_STP_CAPABILITY_H
#define ARBOR_STP_CAPABILITY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* MHz assumed for a logical CPU whose /proc/cpuinfo block has no "cpu MHz" line (many ARM
 * kernels); stp_host_resources.mhz_estimated then says so. */
#define STP_CAPABILITY_DEFAULT_MHZ 1000

#define STP_CAPABILITY_DEFAULT_ALPHA 1.0 /* per MHz */
#define STP_CAPABILITY_DEFAULT_BETA 1.0  /* per MiB */

struct stp_host_resources {
    uint32_t cpu_count;     /* logical CPUs ("processor" entries) */
    uint64_t cpu_mhz_total; /* L: sum of per-CPU MHz */
    bool mhz_estimated;     /* at least one CPU had no MHz line */
    uint64_t memory_mib;    /* M: MemTotal / 1024 */
};

/* 0 on success; -1 when no processor entry is found. Fills the CPU fields of out. */
int stp_capability_parse_cpuinfo(const char *text, struct stp_host_resources *out);

/* 0 on success; -1 when there is no valid "MemTotal: N kB" line. Fills memory_mib. */
int stp_capability_parse_meminfo(const char *text, struct stp_host_resources *out);

/* alpha * L + beta * M, rounded, clamped to [0, UINT32_MAX]. Negative or non-finite weights
 * count as 0. */
uint32_t stp_capability_compute(const struct stp_host_resources *resources, double alpha,
                                double beta);

#endif
