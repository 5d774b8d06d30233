/*
 * persist_hooks.h: what the core (sessions, their outbound flow, the retained store) tells
 * persistence, without depending on it. persist.c points broker->shared->persist_hooks at its own
 * functions when persistence is on; each wrapper here does nothing without it. Packet
 * handlers, which sit above both, call persist.h directly. (The message log is followed
 * through its own observer, message_log.h.)
 *
 * Sections: a layer above the core that keeps a small state of its own across restarts
 * (MQTT-ST: its stream and what it has seen) registers a section. Persistence saves the
 * section's bytes with every full save and, in durable mode, whenever the layer says they
 * changed (persist_hook_section_changed: written before any output leaves this turn), and
 * hands them back at start-up, after the retained messages, sessions and message log.
 */
#ifndef ARBOR_PERSIST_HOOKS_H
#define ARBOR_PERSIST_HOOKS_H

#include "broker_shared.h"
#include "buffer.h"

/* How a section's bytes are being saved. */
struct persist_section_save {
    bool final;   /* the last save of a clean shutdown */
    bool durable; /* persistence_mode durable: also written whenever they change */
};

struct persist_section {
    const char *name; /* its key in the file */
    void *ctx;
    /* Append the section's bytes to out: 0, or -1 when out of memory. */
    int (*save)(void *ctx, struct abuf *out, const struct persist_section_save *how);
    /* At start-up: the bytes last saved (NULL, 0: none were), once, when everything else is
     * restored. */
    void (*restore)(void *ctx, const uint8_t *data, size_t len);
};

/* Register a section (before persistence starts): 0, or -1 when there is no room. */
static inline int persist_section_add(struct broker_shared *shared,
                                      const struct persist_section *section)
{
    if (shared->persist_section_count >= PERSIST_SECTIONS_MAX) return -1;
    shared->persist_sections[shared->persist_section_count++] = section;
    return 0;
}

struct persist_hooks {
    void (*retained_changed)(struct broker *broker, const struct message *msg);
    void (*session_changed)(struct broker *broker, struct session *session);
    void (*session_removed)(struct broker *broker, struct session *session);
    void (*delivery_changed)(struct broker *broker, struct session *session,
                             struct delivery *delivery);
    void (*delivery_released)(struct broker *broker, struct delivery *delivery);
    /* A QoS 2 delivery's PUBREC came: its message is released, the PUBREL flow stays. */
    void (*delivery_drops_message)(struct broker *broker, struct delivery *delivery);
    /* A section's bytes changed and must be written before output leaves (durable mode). */
    void (*section_changed)(struct broker *broker, const struct persist_section *section);
    /* Several loops: work that may write rows was handed to another loop (a QoS 1/2 message
     * posted to a session there, a message to loop 0's forwarders). What this loop
     * acknowledges now depends on those rows: output waits until loop 0 has had the work
     * done and committed (durable mode). */
    void (*handed_over)(struct broker *broker);
};

static inline const struct persist_hooks *persist_hooks_of(const struct broker *broker)
{
    return broker->shared->persist_hooks;
}

static inline void persist_hook_retained_changed(struct broker *broker, const struct message *msg)
{
    const struct persist_hooks *hooks = persist_hooks_of(broker);
    if (hooks) hooks->retained_changed(broker, msg);
}

static inline void persist_hook_session_changed(struct broker *broker, struct session *session)
{
    const struct persist_hooks *hooks = persist_hooks_of(broker);
    if (hooks) hooks->session_changed(broker, session);
}

static inline void persist_hook_session_removed(struct broker *broker, struct session *session)
{
    const struct persist_hooks *hooks = persist_hooks_of(broker);
    if (hooks) hooks->session_removed(broker, session);
}

static inline void persist_hook_delivery_changed(struct broker *broker, struct session *session,
                                                 struct delivery *delivery)
{
    const struct persist_hooks *hooks = persist_hooks_of(broker);
    if (hooks) hooks->delivery_changed(broker, session, delivery);
}

static inline void persist_hook_delivery_released(struct broker *broker, struct delivery *delivery)
{
    const struct persist_hooks *hooks = persist_hooks_of(broker);
    if (hooks) hooks->delivery_released(broker, delivery);
}

static inline void persist_hook_delivery_drops_message(struct broker *broker,
                                                      struct delivery *delivery)
{
    const struct persist_hooks *hooks = persist_hooks_of(broker);
    if (hooks) hooks->delivery_drops_message(broker, delivery);
}

static inline void persist_hook_section_changed(struct broker *broker,
                                                const struct persist_section *section)
{
    const struct persist_hooks *hooks = persist_hooks_of(broker);
    if (hooks) hooks->section_changed(broker, section);
}

static inline void persist_hook_handed_over(struct broker *broker)
{
    const struct persist_hooks *hooks = persist_hooks_of(broker);
    if (hooks) hooks->handed_over(broker);
}

#endif
