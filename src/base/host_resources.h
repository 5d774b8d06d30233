/*
 * host_resources.h: the CPU and memory of this host, read from /proc, for the MQTT-ST
 * capability C = alpha * MHz + beta * MiB (stp/capability.h computes C).
 */
#ifndef ARBOR_HOST_RESOURCES_H
#define ARBOR_HOST_RESOURCES_H

#include "capability.h"

/* Reads both files (NULL means /proc/cpuinfo, /proc/meminfo). 0 on success, -1 on any error. */
int host_resources_read(const char *cpuinfo_path, const char *meminfo_path,
                        struct stp_host_resources *out);

#endif
