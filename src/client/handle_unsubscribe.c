/*
 * handle_unsubscribe.c: UNSUBSCRIBE: remove each filter from the tree and the session and
 * answer UNSUBACK (per-filter reason codes for v5).
 */
#include <string.h>

#include "connection.h"
#include "client_state.h"
#include "handlers.h"
#include "log.h"
#include "packet.h"
#include "persist.h"
#include "session.h"
#include "subs.h"

#define MAX_FILTERS_PER_UNSUBSCRIBE 1024

int handle_unsubscribe(struct connection *conn, const uint8_t *body, size_t len)
{
    struct client *client = client_of(conn);
    struct broker *broker = conn->broker;
    struct mqtt_unsubscribe unsub;
    int rc = mqtt_decode_unsubscribe(conn->version, body, len, &unsub);
    if (rc) return rc;
    if (unsub.count > MAX_FILTERS_PER_UNSUBSCRIBE) return MQTT_RC_QUOTA_EXCEEDED;
    uint8_t codes[MAX_FILTERS_PER_UNSUBSCRIBE];
    size_t pos = 0, n = 0;
    struct wire_bytes f;
    while (mqtt_unsubscribe_next(&unsub, &pos, &f)) {
        char filter[MQTT_TOPIC_BUFFER];
        if (client_mount_filter(client, f.data, f.len, filter) < 0)
            return MQTT_RC_TOPIC_FILTER_INVALID;
        codes[n] = MQTT_RC_NO_SUBSCRIPTION_EXISTED;
        if (session_forget_subscription(client->session, filter)) {
            subs_remove(broker->shared->subscriptions, filter, &client->session->subscriber);
            persist_subscription_changed(broker, client->session, filter, NULL);
            broker->stats.subscriptions--;
            if (is_shared_filter(filter)) broker->stats.shared_subscriptions--;
            codes[n] = MQTT_RC_SUCCESS;
        }
        log_printf(ARBOR_LOG_UNSUBSCRIBE, "%s %s", conn->name, filter);
        n++;
    }
    abuf_reset(&broker->scratch);
    if (mqtt_encode_suback(&broker->scratch, conn->version, MQTT_UNSUBACK, unsub.packet_id,
                           (struct mqtt_props_out){0}, codes, n) ||
        connection_send_scratch(conn))
        return MQTT_RC_UNSPECIFIED;
    return 0;
}
