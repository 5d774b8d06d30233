/*
 * cmd_show.c: `arbor_stp show`, and reading one broker's $SYS/broker/stp view, which `tree`
 * and `watch` use too. The view is whatever the broker holds retained when we subscribe: it
 * republishes every value that changes, so that is its current state.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cli.h"
#include "stp_graph.h"
#include "stp_report.h"

int stp_cli_collect(struct sys_client *c, struct stp_view *out, char *why, size_t why_len)
{
    int64_t end = sys_client_now_ms() + STP_CLI_COLLECT_MAX_MS;
    for (;;) {
        int64_t left = end - sys_client_now_ms();
        if (left <= 0) return 0;
        struct sys_message m;
        int rc = sys_client_next(c, left < STP_CLI_QUIET_MS ? (int)left : STP_CLI_QUIET_MS, &m,
                                 why, why_len);
        if (rc == SYS_CLIENT_ERROR) return -1;
        if (rc == SYS_CLIENT_TIMEOUT) return 0;
        if (stp_view_apply(out, m.topic, m.topic_len, m.payload, m.payload_len) < 0) {
            snprintf(why, why_len, "out of memory");
            return -1;
        }
    }
}

int stp_cli_fetch(void *ctx, const char *host, uint16_t port, struct stp_view *out, char *why,
                  size_t why_len)
{
    const struct stp_cli *o = ctx;
    struct sys_client c;
    if (sys_client_connect(&c, host, port, &o->client, why, why_len) != 0)
        return STP_FETCH_UNREACHABLE;
    int rc = sys_client_subscribe(&c, STP_SYS_FILTER, o->client.timeout_ms, why, why_len);
    if (rc == 0) rc = stp_cli_collect(&c, out, why, why_len);
    sys_client_close(&c);
    if (rc != 0) return STP_FETCH_UNREACHABLE;
    if (!stp_view_has_stp(out)) {
        snprintf(why, why_len, "no $SYS/broker/stp topics");
        return STP_FETCH_NO_STP;
    }
    return STP_FETCH_OK;
}

int stp_cli_fetch_failed(const char *host, uint16_t port, int status, const char *why)
{
    switch (status) {
    case STP_FETCH_NO_STP:
        fprintf(stderr,
                "arbor_stp: %s:%u publishes no $SYS/broker/stp topics: MQTT-ST peering is not "
                "configured on that broker (no peer lines), or its sys_interval is 0\n",
                host, port);
        return STP_EXIT_NO_STP;
    case STP_FETCH_UNREACHABLE:
        fprintf(stderr, "arbor_stp: cannot read %s:%u: %s\n", host, port, why);
        return STP_EXIT_UNREACHABLE;
    default:
        fprintf(stderr, "arbor_stp: %s\n", why[0] ? why : "out of memory");
        return STP_EXIT_FAILED;
    }
}

static int print_json(const struct stp_view *v)
{
    cJSON *json = stp_report_json(v);
    char *text = json ? cJSON_Print(json) : NULL;
    cJSON_Delete(json);
    if (!text) {
        fprintf(stderr, "arbor_stp: out of memory\n");
        return STP_EXIT_FAILED;
    }
    puts(text);
    free(text);
    return STP_EXIT_OK;
}

int stp_cli_show(const struct stp_cli *o)
{
    struct stp_view view;
    char why[256] = "";
    stp_view_init(&view);
    int status = stp_cli_fetch((void *)o, o->host, o->port, &view, why, sizeof why);
    int rc;
    if (status != STP_FETCH_OK)
        rc = stp_cli_fetch_failed(o->host, o->port, status, why);
    else if (o->json)
        rc = print_json(&view);
    else {
        stp_report_table(stdout, &view);
        rc = STP_EXIT_OK;
    }
    stp_view_free(&view);
    if (rc == STP_EXIT_OK && fflush(stdout) != 0) rc = STP_EXIT_FAILED;
    return rc;
}
