/*
 * stp_report.h: one broker's view (stp_view.h) as `arbor_stp show` prints it: a table (the
 * broker's values as label/value lines, then one row per peer link) or one JSON object shaped
 * like the $SYS topic tree. Formatting only: it writes to the FILE it is given.
 */
#ifndef ARBOR_STP_REPORT_H
#define ARBOR_STP_REPORT_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "stp_view.h"

/* Absent values are printed as "-", forwarding as "yes"/"no". */
void stp_report_table(FILE *out, const struct stp_view *v);

/* {"id": ..., "root": {"id", "capability", "cost_us", "link"}, ..., "bpdus": {...},
 * "messages": {...}, "peers": [{"id", "state", "role", "forwarding", "srtt_us", "cost_us",
 * "bpdus": {"sent", "received"}}]}: numbers as numbers, forwarding as a boolean, absent values
 * as null. NULL when memory ran out; the caller deletes it. */
cJSON *stp_report_json(const struct stp_view *v);

#endif
