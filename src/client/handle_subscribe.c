/*
 * handle_subscribe.c: SUBSCRIBE: validate each filter, record it in the subscription tree
 * and the session, answer with SUBACK, then send the retained messages each new
 * subscription asks for (retain handling 0/1/2; none for shared subscriptions), paced by
 * the session (session_add_retained).
 */
#include <stdio.h>
#include <string.h>

#include "connection.h"
#include "client_state.h"
#include "handlers.h"
#include "log.h"
#include "message.h"
#include "packet.h"
#include "persist.h"
#include "session.h"
#include "subs.h"
#include "topic.h"
#include "session_flow.h"

#define MAX_FILTERS_PER_SUBSCRIBE 1024

/* Check one requested filter: 0 and the QoS granted in *granted, or the reason to close the
 * connection. Like Mosquitto, a filter arbor does not take ends the connection rather than
 * failing alone. One that breaks the rules of MQTT (4.7, 4.8.2) is a Malformed Packet, as
 * Mosquitto says; a correct filter deeper than the limit is "Topic Filter invalid", the more
 * specific reason 4.13.1 asks for (Mosquitto says malformed). */
static int validate_request(const struct connection *conn,
                            const struct mqtt_subscription_request *req, bool *shared,
                            uint8_t *granted)
{
    const char *filter = (const char *)req->filter.data;
    size_t len = req->filter.len;
    const char *group, *inner;
    size_t group_len, inner_len;
    (void)topic_parse_shared(filter, len, shared, &group, &group_len, &inner, &inner_len);
    int refused = mqtt_filter_refusal(filter, len);
    if (refused) return refused;
    if (*shared && req->no_local && conn->version == MQTT_V5) return MQTT_RC_PROTOCOL_ERROR;
    uint8_t max_qos = conn->broker->config->max_qos;
    *granted = req->qos < max_qos ? req->qos : max_qos;
    return 0;
}

int handle_subscribe(struct connection *conn, const uint8_t *body, size_t len)
{
    struct client *client = client_of(conn);
    struct broker *broker = conn->broker;
    struct session *session = client->session;
    struct mqtt_subscribe sub;
    int rc = mqtt_decode_subscribe(conn->version, body, len, &sub);
    if (rc) return rc;
    if (sub.count > MAX_FILTERS_PER_SUBSCRIBE) return MQTT_RC_QUOTA_EXCEEDED;
    uint32_t sub_id = 0;
    if (sub.props.present & MQTT_PROP_BIT(MQTT_PROP_SUBSCRIPTION_IDENTIFIER))
        sub_id = sub.props.subscription_identifier;

    uint8_t codes[MAX_FILTERS_PER_SUBSCRIBE];
    struct mqtt_subscription_request reqs[MAX_FILTERS_PER_SUBSCRIBE];
    bool send_retained_for[MAX_FILTERS_PER_SUBSCRIBE];
    size_t pos = 0, n = 0;
    while (mqtt_subscribe_next(&sub, &pos, &reqs[n])) {
        struct mqtt_subscription_request *req = &reqs[n];
        bool shared = false;
        rc = validate_request(conn, req, &shared, &codes[n]);
        if (rc) return rc;
        send_retained_for[n] = false;
        {
            char filter[MQTT_TOPIC_BUFFER];
            if (client_mount_filter(client, req->filter.data, req->filter.len, filter) < 0)
                return MQTT_RC_TOPIC_FILTER_INVALID;
            uint8_t options =
                (uint8_t)(codes[n] | (req->no_local ? SUB_OPT_NO_LOCAL : 0) |
                          (req->retain_as_published ? SUB_OPT_RETAIN_AS_PUBLISHED : 0) |
                          (req->retain_handling << 4));
            bool replaced = false;
            struct subscription_tree *tree = broker->shared->subscriptions;
            bool added =
                subs_add(tree, filter, &session->subscriber, options, sub_id, &replaced) == 0;
            if (added && session_remember_subscription(session, filter, options, sub_id)) {
                /* The session must know every subscription the tree has for it. */
                if (!replaced) subs_remove(tree, filter, &session->subscriber);
                added = false;
            }
            if (!added) {
                codes[n] = conn->version == MQTT_V5 ? MQTT_RC_UNSPECIFIED : 0x80;
            } else {
                struct session_subscription *remembered;
                HASH_FIND_STR(session->subscriptions, filter, remembered);
                persist_subscription_changed(broker, session, filter, remembered);
                if (!replaced) broker->stats.subscriptions++;
                if (!replaced && shared) broker->stats.shared_subscriptions++;
                send_retained_for[n] = !shared && (req->retain_handling == 0 ||
                                                   (req->retain_handling == 1 && !replaced));
                log_printf(ARBOR_LOG_SUBSCRIBE, "%s %u %s", conn->name, codes[n], filter);
            }
        }
        n++;
    }
    abuf_reset(&broker->scratch);
    if (mqtt_encode_suback(&broker->scratch, conn->version, MQTT_SUBACK, sub.packet_id,
                           (struct mqtt_props_out){0}, codes, n) ||
        connection_send_scratch(conn))
        return MQTT_RC_UNSPECIFIED;
    for (size_t i = 0; i < n; i++) {
        if (!send_retained_for[i]) continue;
        char filter[MQTT_TOPIC_BUFFER];
        long filter_len =
            client_mount_filter(client, reqs[i].filter.data, reqs[i].filter.len, filter);
        if (session_add_retained(broker, session, filter, (size_t)filter_len, codes[i], sub_id))
            log_error("Out of memory sending retained messages to %s.", conn->name);
    }
    session_pump(broker, session);
    return 0;
}
