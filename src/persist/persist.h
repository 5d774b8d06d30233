/*
 * persist.h: persistence (`persistence true`): what the broker keeps on disk and when. The
 * broker calls this layer at a few well-defined points and nowhere else touches the store:
 *
 *   start-up     persist_start: open the file, restore retained messages, then sessions with
 *                their subscriptions, incoming QoS 2 ids, queued and in-flight messages and
 *                wills; times (expiry, will delay) are measured across the downtime.
 *   each turn    snapshot mode: persist_autosave when persist_autosave_due (with several
 *                event loops, the others parked meanwhile); durable mode: loop 0's turn
 *                ends with persist_commit, before output is written (persist_holds_output);
 *                with several loops, loop 0 commits for all of them with the others parked
 *                (persist_commit_wanted, persist_commit_parked), and the hooks, called on
 *                every loop, write one at a time.
 *   shutdown     persist_stop: a last full save, the store closed.
 *   changes      the persist_*_changed hooks below, called where the state changes. In
 *                snapshot mode they only count changes (autosave_on_changes); in durable mode
 *                they write the rows of persistent sessions (session expiry > 0) and retained
 *                messages into the loop turn's transaction.
 *
 * Modes (arbor.conf(5) PERSISTENCE says what each promises): snapshot, Mosquitto's, writes
 * everything at shutdown and every autosave_interval; durable writes each change ahead of the
 * acknowledgement that depends on it, one fsync per loop turn.
 */
#ifndef ARBOR_PERSIST_H
#define ARBOR_PERSIST_H

#include <stdbool.h>
#include <stdint.h>

#include "broker_shared.h"

struct persist;

/* Open the store named by the config and restore what it holds. Called once the listeners are
 * open and privileges dropped, before the first loop turn. A damaged file never stops the
 * start: what is intact is restored and what was dropped is logged. Returns -1 (logged) only
 * when the file cannot be used at all (permissions, another program's file, newer format). */
int persist_start(struct broker *broker);
/* Save everything and close the store (the sessions are offline by now). */
void persist_stop(struct broker *broker);

/* SIGUSR1: a full save now (any mode), as Mosquitto writes its file on SIGUSR1 (the other
 * loops parked by the caller, as for an autosave). */
void persist_save_now(struct broker *broker);
/* Durable mode: rows written but not yet committed; output must wait for persist_commit. */
bool persist_holds_output(const struct broker *broker);
/* Durable mode: commit the turn's rows (fsync), at the end of loop 0's turn and before any
 * output is written (the output_commit hook). On failure everything is written again at the
 * next try and output keeps waiting. With several loops running it does nothing: see below. */
void persist_commit(struct broker *broker);
/* Several loops, durable mode: loop 0 commits at its turn end, with the other loops parked
 * (none in the middle of a packet whose rows must commit together) and every loop's inbox
 * drained (the deliveries of messages acknowledged so far have written their rows): when
 * rows are pending, work was handed over, or a failed write is due for its retry. */
bool persist_commit_wanted(const struct broker *broker);
void persist_commit_parked(struct broker *loop0);
/* Shutdown, the workers stopped and every inbox drained: loop 0 commits as one loop does from
 * now on (each flush, so that the last packets go out). */
void persist_workers_stopped(struct broker *loop0);
/* Snapshot mode: whether an autosave is due (autosave_interval, or autosave_on_changes and
 * the changes every loop counts). */
bool persist_autosave_due(const struct broker *broker);
/* Snapshot mode: save now and schedule the next autosave. The caller decided it is due and,
 * with several loops, parked the others: a save reads every loop's sessions. */
void persist_autosave(struct broker *broker);
/* When loop 0's turn end next has persistence work (TIMER_NONE: none). */
int64_t persist_next_deadline(const struct broker *broker);

/* A client's will is kept for its session across a shutdown instead of being published
 * (persistence on, a session that outlives the shutdown and a will delay). */
bool persist_keeps_will_at_shutdown(const struct broker *broker, const struct connection *conn);

/* Hooks. */
void persist_retained_changed(struct broker *broker, const struct message *msg);
void persist_session_changed(struct broker *broker, struct session *session);
void persist_session_removed(struct broker *broker, struct session *session);
void persist_subscription_changed(struct broker *broker, struct session *session,
                                  const char *filter, const struct session_subscription *sub);
void persist_qos2_in_changed(struct broker *broker, struct session *session, uint16_t packet_id,
                             bool present);
/* A QoS 1/2 delivery was queued, put in flight, or moved back to the queue. */
void persist_delivery_changed(struct broker *broker, struct session *session,
                              struct delivery *delivery);
/* The delivery lets go of its message (QoS 2 PUBREC: only PUBREL/PUBCOMP remain). */
void persist_delivery_drops_message(struct broker *broker, struct delivery *delivery);
void persist_section_changed(struct broker *broker, const struct persist_section *section);
/* The delivery is released (acknowledged, expired, dropped, or its session ended). */
void persist_delivery_released(struct broker *broker, struct delivery *delivery);

#endif
