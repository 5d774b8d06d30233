/*
 * capability.c: reads CPU and memory figures from /proc text and turns them into the MQTT-ST
 * capability value. Parsing is line-oriented and tolerant of unknown lines; it must never
 * read past the NUL that ends the text. No other part of stp/ may touch the file system.
 */
#include "capability.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* If line starts with `key` followed by optional blanks and ':', returns the text after ':'. */
static const char *value_of(const char *line, const char *line_end, const char *key)
{
    size_t key_len = strlen(key);
    if ((size_t)(line_end - line) < key_len || strncmp(line, key, key_len) != 0) return NULL;
    const char *p = line + key_len;
    while (p < line_end && (*p == ' ' || *p == '\t'))
        p++;
    if (p >= line_end || *p != ':') return NULL;
    return p + 1;
}

/* Parses a non-negative decimal number (with optional fraction) in [p, end). */
static int parse_number(const char *p, const char *end, double *value)
{
    char digits[64];
    while (p < end && isspace((unsigned char)*p))
        p++;
    size_t len = 0;
    while (p + len < end && (isdigit((unsigned char)p[len]) || p[len] == '.'))
        len++;
    if (len == 0 || len >= sizeof digits) return -1;
    memcpy(digits, p, len);
    digits[len] = '\0';
    char *parse_end = NULL;
    *value = strtod(digits, &parse_end);
    if (parse_end != digits + len || !isfinite(*value) || *value < 0) return -1;
    return 0;
}

struct cpu_tally {
    uint32_t cpus;
    uint32_t cpus_with_mhz;
    double mhz_total;
    bool current_has_mhz;
};

static void finish_cpu(struct cpu_tally *tally)
{
    if (tally->cpus > 0 && tally->current_has_mhz) tally->cpus_with_mhz++;
    tally->current_has_mhz = false;
}

static void tally_cpuinfo_line(struct cpu_tally *tally, const char *line, const char *end)
{
    double mhz;
    const char *value;
    if (value_of(line, end, "processor") != NULL) {
        finish_cpu(tally);
        tally->cpus++;
    } else if ((value = value_of(line, end, "cpu MHz")) != NULL && tally->cpus > 0 &&
               !tally->current_has_mhz && parse_number(value, end, &mhz) == 0) {
        tally->mhz_total += mhz;
        tally->current_has_mhz = true;
    }
}

int stp_capability_parse_cpuinfo(const char *text, struct stp_host_resources *out)
{
    struct cpu_tally tally = {0};
    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        const char *line_end = end != NULL ? end : line + strlen(line);
        tally_cpuinfo_line(&tally, line, line_end);
        line = end != NULL ? end + 1 : NULL;
    }
    finish_cpu(&tally);
    if (tally.cpus == 0) return -1;
    uint32_t without_mhz = tally.cpus - tally.cpus_with_mhz;
    out->cpu_count = tally.cpus;
    out->cpu_mhz_total =
        (uint64_t)llround(tally.mhz_total) + (uint64_t)without_mhz * STP_CAPABILITY_DEFAULT_MHZ;
    out->mhz_estimated = without_mhz > 0;
    return 0;
}

static int parse_memtotal_line(const char *line, const char *end, uint64_t *kib)
{
    const char *value = value_of(line, end, "MemTotal");
    double number;
    if (value == NULL || parse_number(value, end, &number) != 0) return -1;
    const char *unit = value;
    while (unit < end && (isspace((unsigned char)*unit) || isdigit((unsigned char)*unit)))
        unit++;
    if ((size_t)(end - unit) < 2 || strncmp(unit, "kB", 2) != 0) return -1;
    *kib = (uint64_t)number;
    return 0;
}

int stp_capability_parse_meminfo(const char *text, struct stp_host_resources *out)
{
    for (const char *line = text; line != NULL && *line != '\0';) {
        const char *end = strchr(line, '\n');
        const char *line_end = end != NULL ? end : line + strlen(line);
        uint64_t kib;
        if (parse_memtotal_line(line, line_end, &kib) == 0) {
            out->memory_mib = kib / 1024;
            return 0;
        }
        line = end != NULL ? end + 1 : NULL;
    }
    return -1;
}

static double usable_weight(double weight)
{
    return isfinite(weight) && weight > 0 ? weight : 0;
}

uint32_t stp_capability_compute(const struct stp_host_resources *resources, double alpha,
                                double beta)
{
    double value = usable_weight(alpha) * (double)resources->cpu_mhz_total +
                   usable_weight(beta) * (double)resources->memory_mib;
    if (!(value > 0)) return 0;
    if (value >= (double)UINT32_MAX) return UINT32_MAX;
    return (uint32_t)llround(value);
}
