-- mqtt-st.lua: a Wireshark dissector for MQTT-ST, the spanning-tree protocol arbor brokers
-- speak between each other inside MQTT (docs/mqtt-st-protocol.md).
--
-- Wireshark's own MQTT dissector keeps decoding every packet; this script adds a protocol
-- "MQTT-ST" (filter prefix mqttst.) next to it for what MQTT-ST puts on the wire:
--   * the peer CONNECT (protocol level 0x85), its auth method and client nonce, and the
--     AUTH exchange (server nonce, server proof, server identity; client proof), CONNACK's
--     mqtt-st-id: the built-in dissector takes 0x85 for an unknown version and does not
--     decode the MQTT 5 properties of these packets;
--   * the BPDU a peer carries in PINGREQ, every field, with the checks of section 3.4;
--   * the mqtt-st-origin user property of a peer PUBLISH, the mqtt-st-bridge one after it, and
--     the mqtt-st-share marks after those (section 7.9: the shared groups given the message);
--   * the announcements of bridges shared by the tree ($MQTT-ST/bridge/<name>, section 7.5);
--   * the interest announcements of a link ($MQTT-ST/link/interest, section 7.7) and the
--     skip notices ($MQTT-ST/link/skip, section 7.8: numbers left out by interest), read as a
--     lost notice is;
--   * the shared-group tables of a link ($MQTT-ST/link/shares, section 7.9: each group's key
--     and distance), read as strictly as the brokers read them;
--   * the resync packets of a link ($MQTT-ST/link/summary and $MQTT-ST/link/lost, section
--     7.3.1), which carry no origin, read as strictly as the brokers read them.
--
-- How it hooks in: a post-dissector reads every MQTT PDU the built-in dissector found in a
-- frame (the "mqtt" protocol item spans exactly one PDU, also a reassembled one) and parses
-- its bytes itself, so nothing of the built-in dissection changes. Peer links listen on
-- arbitrary ports, so a TCP heuristic recognises a connection by its peer CONNECT, or by a
-- BPDU-carrying PINGREQ when the capture started later, and adds the server port to MQTT's
-- "tcp.port" table; the preference "Extra MQTT ports" does the same for a fixed list.
--
-- Load it with `tshark -X lua_script:tools/wireshark/mqtt-st.lua`, or copy it into
-- Wireshark's personal Lua plugin folder (tools/wireshark/README.md).

-- Loaded twice (plugin folder and -X lua_script): the first copy does the work. Each script
-- has its own globals; package.loaded is shared by all of them.
if package.loaded["arbor.mqtt-st-dissector"] then return end
package.loaded["arbor.mqtt-st-dissector"] = true

local mqttst = Proto("mqttst", "MQTT-ST")

-- --------------------------------------------------------------------------- constants

local PEER_LEVEL = 0x85
local AUTH_METHOD = "MQTT-ST-HMAC-SHA256"
local ORIGIN_PROPERTY = "mqtt-st-origin"
local ID_PROPERTY = "mqtt-st-id"
local BRIDGE_PROPERTY = "mqtt-st-bridge"
local SHARE_PROPERTY = "mqtt-st-share"
local SHARE_MARKS_MAX = 64      -- marks on one message (peer_flood.c SHARE_MARKS_MAX)
local SHARE_DISTANCE_MAX = 64   -- in a table (PEER_SHARE_DISTANCE_MAX)
local ANNOUNCE_PREFIX = "$MQTT-ST/bridge/"
local LINK_PREFIX = "$MQTT-ST/link/"
local NONCE_LEN, PROOF_LEN = 16, 32
local BPDU_HEADER_LEN = 19

local PT_CONNECT, PT_CONNACK, PT_PUBLISH = 1, 2, 3
local PT_PINGREQ, PT_DISCONNECT, PT_AUTH = 12, 14, 15
local PACKET_NAMES = { "CONNECT", "CONNACK", "PUBLISH", "PUBACK", "PUBREC", "PUBREL", "PUBCOMP",
                       "SUBSCRIBE", "SUBACK", "UNSUBSCRIBE", "UNSUBACK", "PINGREQ", "PINGRESP",
                       "DISCONNECT", "AUTH" }

local ROLE_NAMES = { [0] = "invalid (00)", [1] = "root", [2] = "designated", [3] = "blocked" }
local QOS_NAMES = { [0] = "at most once", [1] = "at least once", [2] = "exactly once" }
local LEVEL_NAMES = { [3] = "MQTT 3.1", [4] = "MQTT 3.1.1", [5] = "MQTT 5.0" }
local AUTH_REASONS = { [0x00] = "Success", [0x18] = "Continue authentication",
                       [0x19] = "Re-authenticate" }
local CONNACK_REASONS = {
    [0x00] = "Success",
    [0x84] = "Unsupported protocol version (peering not configured)",
    [0x85] = "Client identifier not valid (not an identity, or the acceptor's own)",
    [0x87] = "Not authorized (wrong proof, or a secret is required)",
    [0x8C] = "Bad authentication method",
}
local DISCONNECT_REASONS = { [0x00] = "Normal disconnection", [0x81] = "Malformed packet",
                             [0x82] = "Protocol error",
                             [0x87] = "Not authorized (the acceptor's proof was wrong)" }

-- MQTT 5 properties: id -> name, kind (byte, u16, u32, varint, string, binary, pair)
local PROPERTIES = {
    [0x01] = { "Payload Format Indicator", "byte" },
    [0x02] = { "Message Expiry Interval", "u32" },
    [0x03] = { "Content Type", "string" },
    [0x08] = { "Response Topic", "string" },
    [0x09] = { "Correlation Data", "binary" },
    [0x0B] = { "Subscription Identifier", "varint" },
    [0x11] = { "Session Expiry Interval", "u32" },
    [0x12] = { "Assigned Client Identifier", "string" },
    [0x13] = { "Server Keep Alive", "u16" },
    [0x15] = { "Authentication Method", "string" },
    [0x16] = { "Authentication Data", "binary" },
    [0x17] = { "Request Problem Information", "byte" },
    [0x18] = { "Will Delay Interval", "u32" },
    [0x19] = { "Request Response Information", "byte" },
    [0x1A] = { "Response Information", "string" },
    [0x1C] = { "Server Reference", "string" },
    [0x1F] = { "Reason String", "string" },
    [0x21] = { "Receive Maximum", "u16" },
    [0x22] = { "Topic Alias Maximum", "u16" },
    [0x23] = { "Topic Alias", "u16" },
    [0x24] = { "Maximum QoS", "byte" },
    [0x25] = { "Retain Available", "byte" },
    [0x26] = { "User Property", "pair" },
    [0x27] = { "Maximum Packet Size", "u32" },
    [0x28] = { "Wildcard Subscription Available", "byte" },
    [0x29] = { "Subscription Identifier Available", "byte" },
    [0x2A] = { "Shared Subscription Available", "byte" },
}
local PROP_AUTH_METHOD, PROP_AUTH_DATA, PROP_USER = 0x15, 0x16, 0x26

-- The checks of section 3.4, in their order: reason key, result code of stp/bpdu.h, text.
local BPDU_ERRORS = {
    empty = { "STP_BPDU_TRUNCATED", "empty payload" },
    bad_version = { "STP_BPDU_BAD_VERSION", "version byte is not 1" },
    too_short = { "STP_BPDU_TRUNCATED", "fewer than 19 bytes" },
    bad_flags = { "STP_BPDU_BAD_FLAGS", "reserved flag bits set, or role bits 00" },
    truncated = { "STP_BPDU_TRUNCATED", "fewer bytes than the family bits require" },
    trailing_bytes = { "STP_BPDU_TRAILING_BYTES", "more bytes than the family bits require" },
    bad_id = { "STP_BPDU_BAD_ID", "identity with port 0, an unspecified address, or an " ..
                                  "IPv4-mapped address in the 18-byte form" },
    inconsistent = { "STP_BPDU_INCONSISTENT", "fields contradict each other" },
}
local BPDU_ERROR_ORDER = { "empty", "bad_version", "too_short", "bad_flags", "truncated",
                           "trailing_bytes", "bad_id", "inconsistent" }

-- --------------------------------------------------------------------------- fields

local F = {}
local function def(key, pf)
    assert(F[key] == nil, "field key used twice: " .. key)
    F[key] = pf
end

-- CONNECT
def("level", ProtoField.uint8("mqttst.connect.level", "Protocol level", base.HEX))
def("peer", ProtoField.bool("mqttst.connect.peer", "Peer flag (0x80)", 8, nil, 0x80))
def("mqtt_level", ProtoField.uint8("mqttst.connect.mqtt_level", "MQTT level", base.DEC,
    LEVEL_NAMES, 0x7F))
def("connect_id", ProtoField.string("mqttst.connect.id", "Dialling broker (client identifier)"))
def("bridge", ProtoField.string("mqttst.connect.bridge", "Mosquitto bridge"))
-- AUTH exchange (method and client nonce ride in CONNECT)
def("auth_method", ProtoField.string("mqttst.auth.method", "Authentication method"))
def("client_nonce", ProtoField.bytes("mqttst.auth.client_nonce", "Client nonce (Nc)"))
def("auth_reason", ProtoField.uint8("mqttst.auth.reason", "AUTH reason code", base.HEX,
    AUTH_REASONS))
def("server_nonce", ProtoField.bytes("mqttst.auth.server_nonce", "Server nonce (Ns)"))
def("server_proof", ProtoField.bytes("mqttst.auth.server_proof", "Server proof (proof_S)"))
def("server_id", ProtoField.string("mqttst.auth.server_id", "Server identity (S)"))
def("client_proof", ProtoField.bytes("mqttst.auth.client_proof", "Client proof (proof_C)"))
def("auth_data", ProtoField.bytes("mqttst.auth.data", "Authentication data"))
-- CONNACK, DISCONNECT
def("connack_reason", ProtoField.uint8("mqttst.connack.reason", "CONNACK reason code",
    base.HEX, CONNACK_REASONS))
def("connack_id", ProtoField.string("mqttst.connack.id", "Accepting broker (mqtt-st-id)"))
def("disconnect_reason", ProtoField.uint8("mqttst.disconnect.reason",
    "DISCONNECT reason code", base.HEX, DISCONNECT_REASONS))
-- the link a peer connection belongs to (on every packet of it)
def("link_dialler", ProtoField.string("mqttst.link.dialler", "Dialling broker"))
def("link_acceptor", ProtoField.string("mqttst.link.acceptor", "Accepting broker"))
def("link_direction", ProtoField.string("mqttst.link.direction", "Direction"))
-- MQTT 5 properties of peer packets (the built-in dissector skips them)
def("property", ProtoField.string("mqttst.property", "Property"))
-- BPDU
def("bpdu", ProtoField.bytes("mqttst.bpdu", "BPDU"))
def("bpdu_none", ProtoField.none("mqttst.bpdu.none", "Keep-alive without BPDU"))
def("version", ProtoField.uint8("mqttst.bpdu.version", "Version", base.DEC))
def("flags", ProtoField.uint8("mqttst.bpdu.flags", "Flags", base.HEX))
def("tc", ProtoField.bool("mqttst.bpdu.tc", "TC (topology change)", 8, nil, 0x80))
def("tca", ProtoField.bool("mqttst.bpdu.tca", "TCA (topology change acknowledgement)", 8, nil,
    0x40))
def("role", ProtoField.uint8("mqttst.bpdu.role", "Role", base.DEC, ROLE_NAMES, 0x30))
def("root_ipv6_flag", ProtoField.bool("mqttst.bpdu.root_ipv6", "Root identity IPv6", 8, nil,
    0x08))
def("sender_ipv6_flag", ProtoField.bool("mqttst.bpdu.sender_ipv6", "Sender identity IPv6", 8,
    nil, 0x04))
def("reserved", ProtoField.uint8("mqttst.bpdu.reserved", "Reserved", base.HEX, nil, 0x03))
def("role_name", ProtoField.string("mqttst.bpdu.role_name", "Role name"))
def("age", ProtoField.uint8("mqttst.bpdu.age", "Message age (hops to the root)", base.DEC))
def("epoch", ProtoField.uint32("mqttst.bpdu.epoch", "Epoch", base.DEC))
def("root_capability", ProtoField.uint32("mqttst.bpdu.root_capability", "Root capability",
    base.DEC))
def("root_cost", ProtoField.uint32("mqttst.bpdu.root_cost", "Root path cost (µs)", base.DEC))
def("sender_capability", ProtoField.uint32("mqttst.bpdu.sender_capability",
    "Sender capability", base.DEC))
for _, who in ipairs({ "root", "sender" }) do
    local title = who == "root" and "Root" or "Sender"
    def(who, ProtoField.string("mqttst.bpdu." .. who, title .. " identity"))
    def(who .. "_ip", ProtoField.ipv4("mqttst.bpdu." .. who .. ".ip", title .. " address"))
    def(who .. "_ipv6", ProtoField.ipv6("mqttst.bpdu." .. who .. ".ipv6",
        title .. " address (IPv6)"))
    def(who .. "_port", ProtoField.uint16("mqttst.bpdu." .. who .. ".port", title .. " port",
        base.DEC))
end
def("trailing", ProtoField.bytes("mqttst.bpdu.trailing", "Trailing bytes"))
def("bpdu_valid", ProtoField.bool("mqttst.bpdu.valid", "Valid"))
def("bpdu_error", ProtoField.string("mqttst.bpdu.error", "Rejected because"))
def("bpdu_status", ProtoField.string("mqttst.bpdu.status", "Result code (bpdu.h)"))
-- PUBLISH between peers
def("topic", ProtoField.string("mqttst.publish.topic", "Topic"))
def("packet_id", ProtoField.uint16("mqttst.publish.id", "Packet identifier", base.DEC))
def("payload", ProtoField.bytes("mqttst.publish.payload", "Payload"))
def("origin", ProtoField.string("mqttst.origin", "Origin (mqtt-st-origin)"))
def("origin_id", ProtoField.string("mqttst.origin.id", "Origin broker"))
def("origin_incarnation", ProtoField.string("mqttst.origin.incarnation", "Incarnation"))
def("origin_sequence", ProtoField.uint64("mqttst.origin.sequence", "Sequence", base.DEC))
def("origin_time_ms", ProtoField.uint64("mqttst.origin.time_ms", "Origin time (ms since epoch)",
    base.DEC))
def("origin_time", ProtoField.absolute_time("mqttst.origin.time", "Origin time",
    base.UTC))
def("origin_qos", ProtoField.uint8("mqttst.origin.qos", "Published QoS", base.DEC, QOS_NAMES))
def("origin_retained", ProtoField.bool("mqttst.origin.retained_sync",
    "Retained message offered for reconciliation (r)"))
def("bridge_from", ProtoField.string("mqttst.bridge_from",
    "Came in over bridge (mqtt-st-bridge)"))
def("share_mark", ProtoField.string("mqttst.share_mark", "Given shared group (mqtt-st-share)"))
def("share_mark_group", ProtoField.string("mqttst.share_mark.group", "Group"))
def("share_mark_filter", ProtoField.string("mqttst.share_mark.filter", "Filter"))
def("share_marks", ProtoField.uint32("mqttst.share_marks", "Shared groups given (marks)",
    base.DEC))
-- announcements of a bridge shared by the tree ($MQTT-ST/bridge/<name>, section 7.5)
def("announcement", ProtoField.none("mqttst.bridge", "Bridge announcement"))
def("bridge_name", ProtoField.string("mqttst.bridge.name", "Bridge (connection name)"))
def("bridge_version", ProtoField.uint32("mqttst.bridge.version", "Format version", base.DEC))
def("bridge_fingerprint", ProtoField.string("mqttst.bridge.fingerprint", "Fingerprint"))
def("bridge_role", ProtoField.string("mqttst.bridge.role", "Role"))
def("bridge_health", ProtoField.string("mqttst.bridge.health", "Health"))
def("bridge_failing_ms", ProtoField.uint64("mqttst.bridge.failing_ms",
    "Failing since (ms ago)", base.DEC))
def("bridge_priority", ProtoField.uint16("mqttst.bridge.priority",
    "Priority (bridge_priority)", base.DEC))
def("bridge_capability", ProtoField.uint32("mqttst.bridge.capability", "Capability", base.DEC))
def("bridge_delivered", ProtoField.string("mqttst.bridge.delivered", "Delivered"))
def("bridge_delivered_id", ProtoField.string("mqttst.bridge.delivered.id", "Origin broker"))
def("bridge_delivered_incarnation", ProtoField.string("mqttst.bridge.delivered.incarnation",
    "Incarnation"))
def("bridge_delivered_sequence", ProtoField.uint64("mqttst.bridge.delivered.sequence",
    "Acknowledged by the remote up to sequence", base.DEC))
def("bridge_unknown", ProtoField.string("mqttst.bridge.unknown", "Unknown line (ignored)"))
def("bridge_valid", ProtoField.bool("mqttst.bridge.valid", "Valid"))
def("bridge_error", ProtoField.string("mqttst.bridge.error", "Ignored by the brokers because"))
-- resync of a link ($MQTT-ST/link/summary and $MQTT-ST/link/lost, section 7.3.1)
def("resync", ProtoField.none("mqttst.resync", "Resync"))
def("resync_kind", ProtoField.string("mqttst.resync.kind", "Kind"))
def("resync_version", ProtoField.uint32("mqttst.resync.version", "Format version", base.DEC))
def("resync_want", ProtoField.bool("mqttst.resync.want",
    "want (the sender's end starts forwarding: answer with a summary)"))
def("resync_fresh", ProtoField.bool("mqttst.resync.fresh",
    "fresh (the sender started without its log)"))
def("resync_run", ProtoField.string("mqttst.resync.run", "Run"))
def("resync_run_id", ProtoField.string("mqttst.resync.run.id", "Origin broker"))
def("resync_run_incarnation", ProtoField.string("mqttst.resync.run.incarnation", "Incarnation"))
def("resync_run_ranges", ProtoField.string("mqttst.resync.run.ranges", "Sequence ranges"))
def("resync_run_count", ProtoField.uint64("mqttst.resync.run.count", "Sequence numbers",
    base.DEC))
def("resync_run_first", ProtoField.uint64("mqttst.resync.run.first", "Lowest sequence",
    base.DEC))
def("resync_run_last", ProtoField.uint64("mqttst.resync.run.last", "Highest sequence",
    base.DEC))
def("resync_runs", ProtoField.uint32("mqttst.resync.runs", "Runs", base.DEC))
def("resync_count", ProtoField.uint64("mqttst.resync.count", "Sequence numbers of all runs",
    base.DEC))
def("resync_valid", ProtoField.bool("mqttst.resync.valid", "Valid"))
def("resync_error", ProtoField.string("mqttst.resync.error",
    "Refused by the brokers (0x81) because"))
-- interest announcements ($MQTT-ST/link/interest, section 7.7)
def("interest", ProtoField.none("mqttst.interest", "Interest announcement"))
def("interest_version", ProtoField.uint8("mqttst.interest.version", "Format version", base.DEC))
def("interest_kind", ProtoField.string("mqttst.interest.kind", "Kind"))
def("interest_generation", ProtoField.uint32("mqttst.interest.generation", "Generation",
    base.DEC))
def("interest_everything", ProtoField.bool("mqttst.interest.everything",
    "Everything (any topic: no filters follow)"))
def("interest_carried", ProtoField.bool("mqttst.interest.carried",
    "Carried (the added filters come this way after a tree change: resync)"))
def("interest_add", ProtoField.string("mqttst.interest.add", "Add filter"))
def("interest_remove", ProtoField.string("mqttst.interest.remove", "Remove filter"))
def("interest_adds", ProtoField.uint32("mqttst.interest.adds", "Filters added", base.DEC))
def("interest_removes", ProtoField.uint32("mqttst.interest.removes", "Filters removed",
    base.DEC))
def("interest_valid", ProtoField.bool("mqttst.interest.valid", "Valid"))
def("interest_error", ProtoField.string("mqttst.interest.error",
    "Refused by the brokers (0x81) because"))
-- shared-group tables ($MQTT-ST/link/shares, section 7.9)
def("shares", ProtoField.none("mqttst.shares", "Shared-group table"))
def("shares_version", ProtoField.uint8("mqttst.shares.version", "Format version", base.DEC))
def("shares_entry", ProtoField.none("mqttst.shares.entry", "Entry"))
def("shares_distance", ProtoField.uint8("mqttst.shares.distance",
    "Distance (hops from the sender to the group's nearest member)", base.DEC))
def("shares_key", ProtoField.string("mqttst.shares.key", "Key (<group>/<filter>)"))
def("shares_group", ProtoField.string("mqttst.shares.group", "Group"))
def("shares_filter", ProtoField.string("mqttst.shares.filter", "Filter"))
def("shares_count", ProtoField.uint32("mqttst.shares.count", "Groups", base.DEC))
def("shares_valid", ProtoField.bool("mqttst.shares.valid", "Valid"))
def("shares_error", ProtoField.string("mqttst.shares.error",
    "Refused by the brokers (0x81) because"))

local field_list = {}
for _, pf in pairs(F) do field_list[#field_list + 1] = pf end
mqttst.fields = field_list

-- expert infos
local E = {}
for _, key in ipairs(BPDU_ERROR_ORDER) do
    E["bpdu_" .. key] = ProtoExpert.new("mqttst.bpdu." .. key .. "_error",
        "Malformed BPDU: " .. BPDU_ERRORS[key][2] .. " (" .. BPDU_ERRORS[key][1] .. ")",
        expert.group.MALFORMED, expert.severity.ERROR)
end
-- key in E: filter name, group and severity, text
local EXPERTS = {
    origin_missing = { "mqttst.origin.missing", "PROTOCOL", "ERROR",
        "Peer PUBLISH without the mqtt-st-origin user property" },
    origin_malformed = { "mqttst.origin.malformed", "MALFORMED", "ERROR",
        "Malformed mqtt-st-origin value" },
    origin_not_first = { "mqttst.origin.not_first", "PROTOCOL", "WARN",
        "mqtt-st-origin is not the first user property" },
    bridge_malformed = { "mqttst.bridge.malformed", "MALFORMED", "WARN",
        "Malformed bridge announcement (the brokers ignore it)" },
    bridge_standby_delivered = { "mqttst.bridge.standby_delivered", "PROTOCOL", "WARN",
        "delivered line from a standby (only a holder's count)" },
    resync_malformed = { "mqttst.resync.malformed", "MALFORMED", "ERROR",
        "Malformed resync packet (the broker closes the connection, 0x81)" },
    interest_malformed = { "mqttst.interest.malformed", "MALFORMED", "ERROR",
        "Malformed interest announcement (the broker closes the connection, 0x81)" },
    shares_malformed = { "mqttst.shares.malformed", "MALFORMED", "ERROR",
        "Malformed shared-group table (the broker closes the connection, 0x81)" },
    resync_other = { "mqttst.resync.other", "PROTOCOL", "NOTE",
        "Link-local packet of another version (the brokers ignore it)" },
    bridge_from_empty = { "mqttst.bridge_from.empty", "MALFORMED", "ERROR",
        "Empty mqtt-st-bridge value (the broker closes the connection)" },
    bridge_from_misplaced = { "mqttst.bridge_from.misplaced", "PROTOCOL", "WARN",
        "mqtt-st-bridge is not the user property right after mqtt-st-origin (the brokers " ..
        "do not take it for one)" },
    share_mark_invalid = { "mqttst.share_mark.invalid", "PROTOCOL", "ERROR",
        "mqtt-st-share value is not a shared group's key (the broker closes the " ..
        "connection, 0x82)" },
    share_mark_too_many = { "mqttst.share_mark.too_many", "PROTOCOL", "ERROR",
        "More than 64 mqtt-st-share marks (the broker closes the connection, 0x82)" },
    share_mark_misplaced = { "mqttst.share_mark.misplaced", "PROTOCOL", "WARN",
        "mqtt-st-share is not among the user properties that follow mqtt-st-origin (the " ..
        "brokers do not take it for a mark)" },
    auth = { "mqttst.auth.unexpected", "PROTOCOL", "WARN", "Unexpected peer authentication data" },
    bad_identity = { "mqttst.identity.invalid", "PROTOCOL", "WARN",
        "Not a broker identity (a.b.c.d:port or [v6]:port)" },
    id_mismatch = { "mqttst.connack.id_mismatch", "PROTOCOL", "WARN",
        "mqtt-st-id differs from the server identity of the AUTH" },
    packet = { "mqttst.malformed", "MALFORMED", "ERROR", "Malformed peer packet" },
}
for key, x in pairs(EXPERTS) do
    E[key] = ProtoExpert.new(x[1], x[4], expert.group[x[2]], expert.severity[x[3]])
end
local expert_list = {}
for _, e in pairs(E) do expert_list[#expert_list + 1] = e end
mqttst.experts = expert_list

-- --------------------------------------------------------------------------- preferences

mqttst.prefs.ports = Pref.range("Extra MQTT ports", "",
    "TCP ports to decode as MQTT besides 1883 (peer listeners, proxies), e.g. 1884,2000-2010",
    65535)

local mqtt_handle = Dissector.get("mqtt")
local tcp_ports = DissectorTable.get("tcp.port")
local pref_ports = ""

function mqttst.prefs_changed()
    if pref_ports ~= "" then tcp_ports:remove(pref_ports, mqtt_handle) end
    pref_ports = tostring(mqttst.prefs.ports or "")
    if pref_ports ~= "" then tcp_ports:add(pref_ports, mqtt_handle) end
end

-- --------------------------------------------------------------------------- byte helpers

local function byte_at(r, off) return r:range(off, 1):uint() end
local function u16_at(r, off) return r:range(off, 2):uint() end

-- MQTT variable byte integer at off: value, length in bytes; nil when it does not fit
local function varint_at(r, off)
    local value, mult = 0, 1
    for i = 0, 3 do
        if off + i >= r:len() then return nil end
        local b = byte_at(r, off + i)
        value = value + (b % 128) * mult
        if b < 128 then return value, i + 1 end
        mult = mult * 128
    end
    return nil
end

local function hex_group(r, off) return string.format("%x", u16_at(r, off)) end

-- glibc inet_ntop's IPv6 text (RFC 5952: the first longest run of two or more zero groups
-- is "::"; ::a.b.c.d and ::ffff:a.b.c.d keep the embedded IPv4), as arbor prints identities
local function ipv6_text(r, off)
    local words = {}
    for i = 0, 7 do words[i] = u16_at(r, off + 2 * i) end
    local best_base, best_len, cur_base, cur_len = -1, 0, -1, 0
    for i = 0, 7 do
        if words[i] == 0 then
            if cur_base < 0 then cur_base, cur_len = i, 1 else cur_len = cur_len + 1 end
            if cur_len > best_len then best_base, best_len = cur_base, cur_len end
        else
            cur_base, cur_len = -1, 0
        end
    end
    if best_len < 2 then best_base = -1 end
    local out, i = {}, 0
    while i <= 7 do
        if i == best_base then
            out[#out + 1] = (i == 0) and "::" or ":"
            i = i + best_len
        else
            if i == 6 and best_base == 0 and (best_len == 6 or
                    (best_len == 5 and words[5] == 0xFFFF)) then
                out[#out + 1] = string.format("%d.%d.%d.%d", byte_at(r, off + 12),
                    byte_at(r, off + 13), byte_at(r, off + 14), byte_at(r, off + 15))
                break
            end
            out[#out + 1] = hex_group(r, off + 2 * i)
            if i < 7 then out[#out + 1] = ":" end
            i = i + 1
        end
    end
    local text = table.concat(out)
    return (text:gsub(":::", "::"))
end

-- Text form of a 6- or 18-byte identity at off (section 3.2)
local function identity_text(r, off, len)
    if len == 6 then
        return string.format("%d.%d.%d.%d:%d", byte_at(r, off), byte_at(r, off + 1),
            byte_at(r, off + 2), byte_at(r, off + 3), u16_at(r, off + 4))
    end
    return string.format("[%s]:%d", ipv6_text(r, off), u16_at(r, off + 16))
end

-- Why the identity at off is not acceptable (nil when it is)
local function identity_problem(r, off, len)
    if u16_at(r, off + len - 2) == 0 then return "port 0" end
    local zero = true
    for i = 0, len - 3 do
        if byte_at(r, off + i) ~= 0 then zero = false break end
    end
    if zero then return "unspecified address" end
    if len == 18 then
        local mapped = u16_at(r, off + 10) == 0xFFFF
        for i = 0, 9 do
            if byte_at(r, off + i) ~= 0 then mapped = false break end
        end
        if mapped then return "IPv4-mapped address in the 18-byte form" end
    end
    return nil
end

-- Is the text a broker identity as arbor writes and reads it (a.b.c.d:port or [v6]:port)?
local function is_identity_text(s)
    local a, b, c, d, port = s:match("^(%d+)%.(%d+)%.(%d+)%.(%d+):(%d+)$")
    if a then
        for _, n in ipairs({ a, b, c, d }) do
            if #n > 3 or tonumber(n) > 255 then return false end
        end
    else
        local v6
        v6, port = s:match("^%[([%x:%.]+)%]:(%d+)$")
        if not v6 or not v6:find(":") then return false end
    end
    local p = tonumber(port)
    return #port <= 5 and p ~= nil and p >= 1 and p <= 65535
end

-- --------------------------------------------------------------------------- properties

-- Parses the MQTT 5 properties at off (length prefix included) and, when tree is given,
-- shows them. Returns a list of {id=, range=, value=, key=, vrange=} and the offset after
-- them, or nil and a reason.
local function parse_properties(r, off, limit, tree)
    local plen, vl = varint_at(r, off)
    if not plen or off + vl + plen > limit then return nil, "property length" end
    local props = {}
    local sub
    if tree and plen > 0 then
        sub = tree:add(r:range(off, vl + plen), string.format("Properties (%d bytes)", plen))
    end
    local p, stop = off + vl, off + vl + plen
    while p < stop do
        local id = byte_at(r, p)
        local info = PROPERTIES[id]
        if not info then return nil, string.format("unknown property 0x%02x", id) end
        local kind, q = info[2], p + 1
        local item = { id = id }
        if kind == "byte" then
            if q + 1 > stop then return nil, info[1] end
            item.value, q = byte_at(r, q), q + 1
        elseif kind == "u16" then
            if q + 2 > stop then return nil, info[1] end
            item.value, q = u16_at(r, q), q + 2
        elseif kind == "u32" then
            if q + 4 > stop then return nil, info[1] end
            item.value, q = r:range(q, 4):uint(), q + 4
        elseif kind == "varint" then
            local v, n = varint_at(r, q)
            if not v or q + n > stop then return nil, info[1] end
            item.value, q = v, q + n
        else
            local strings = (kind == "pair") and 2 or 1
            local parts = {}
            for s = 1, strings do
                if q + 2 > stop then return nil, info[1] end
                local n = u16_at(r, q)
                if q + 2 + n > stop then return nil, info[1] end
                local part = { range = r:range(q, 2 + n), len = n, off = q + 2 }
                if n > 0 then
                    part.vrange = r:range(q + 2, n)
                    part.text = part.vrange:string(ENC_UTF_8)
                else
                    part.text = ""
                end
                parts[s] = part
                q = q + 2 + n
            end
            if kind == "pair" then
                item.key, item.value, item.vrange = parts[1].text, parts[2].text, parts[2].vrange
            else
                item.value, item.vrange, item.vlen = parts[1].text, parts[1].vrange, parts[1].len
            end
        end
        item.range = r:range(p, q - p)
        props[#props + 1] = item
        if sub then
            local shown
            if kind == "pair" then
                shown = string.format("%s: %s = %s", info[1], item.key, item.value)
            elseif kind == "binary" then
                shown = string.format("%s: %d bytes", info[1], item.vlen)
            else
                shown = string.format("%s: %s", info[1], tostring(item.value))
            end
            sub:add(F.property, item.range, shown)
        end
        p = q
    end
    return props, stop
end

local function find_property(props, id)
    for _, p in ipairs(props or {}) do
        if p.id == id then return p end
    end
    return nil
end

-- --------------------------------------------------------------------------- conversations

-- Per TCP connection: kind ("peer", "bridge", "client"), the dialler's endpoint, the
-- identities seen. Filled in on the first pass; what each PDU was taken for is remembered
-- per frame so that later passes (GUI clicks, tshark -2) show the same.
local streams = {}
local decisions = {}

function mqttst.init()
    streams = {}
    decisions = {}
end

local f_tcp_stream = Field.new("tcp.stream")

local function stream_key(pinfo)
    local s = { f_tcp_stream() }
    if #s > 0 then return "tcp" .. tostring(s[#s].value) end
    local a = tostring(pinfo.src) .. "/" .. tostring(pinfo.src_port)
    local b = tostring(pinfo.dst) .. "/" .. tostring(pinfo.dst_port)
    if a > b then a, b = b, a end
    return a .. "-" .. b
end

local function endpoint(pinfo, which)
    if which == "src" then return tostring(pinfo.src) .. "/" .. tostring(pinfo.src_port) end
    return tostring(pinfo.dst) .. "/" .. tostring(pinfo.dst_port)
end

-- --------------------------------------------------------------------------- packets

local function new_tree(tree, r, title)
    local t = tree:add(mqttst, r)
    t:append_text(", " .. title)
    return t
end

local function check_identity(item, text)
    if not is_identity_text(text) then item:add_proto_expert_info(E.bad_identity) end
end

-- CONNECT: returns the stream kind it establishes
local function dissect_connect(r, body, body_end, tree, st, info)
    if body + 2 > body_end then return nil end
    local name_len = u16_at(r, body)
    local p = body + 2 + name_len
    if p + 4 > body_end then return nil end
    local level = byte_at(r, p)
    if level < 0x80 then return "client" end
    local mqtt_level = level % 128
    local kind = (mqtt_level == 5) and "peer" or "bridge"
    local t = new_tree(tree, r, kind == "peer" and "peer CONNECT" or "bridge CONNECT")
    local lt = t:add(F.level, r:range(p, 1))
    lt:add(F.peer, r:range(p, 1))
    lt:add(F.mqtt_level, r:range(p, 1))
    local connect_flags = byte_at(r, p + 1)
    p = p + 4
    local props = {}
    if kind == "peer" then
        local err
        props, err = parse_properties(r, p, body_end, t)
        if not props then
            t:add_proto_expert_info(E.packet, "Malformed CONNECT properties: " .. err)
            return kind, t
        end
        p = err
    else
        t:add(F.bridge, r:range(p - 4, 1), "try_private: an ordinary client, not a peer")
            :set_generated()
    end
    if p + 2 > body_end then
        t:add_proto_expert_info(E.packet, "CONNECT without a client identifier")
        return kind, t
    end
    local id_len = u16_at(r, p)
    if p + 2 + id_len > body_end then
        t:add_proto_expert_info(E.packet, "Client identifier runs past the packet")
        return kind, t
    end
    local id = id_len > 0 and r:range(p + 2, id_len):string(ENC_UTF_8) or ""
    if kind ~= "peer" then return kind, t end
    local it = t:add(F.connect_id, r:range(p, 2 + id_len), id)
    check_identity(it, id)
    st.dialler_id = id
    local method = find_property(props, PROP_AUTH_METHOD)
    local data = find_property(props, PROP_AUTH_DATA)
    if method then
        local mt = t:add(F.auth_method, method.range, method.value)
        if method.value ~= AUTH_METHOD then
            mt:add_proto_expert_info(E.auth, "Authentication method is not " .. AUTH_METHOD)
        end
    end
    if data then
        if data.vrange then
            local nt = t:add(F.client_nonce, data.vrange)
            if data.vlen ~= NONCE_LEN then
                nt:add_proto_expert_info(E.auth, string.format(
                    "Client nonce of %d bytes, %d expected", data.vlen, NONCE_LEN))
            end
        else
            t:add_proto_expert_info(E.auth, "Empty client nonce")
        end
    end
    if connect_flags ~= 0x02 then
        t:add_proto_expert_info(E.packet, string.format(
            "Peer CONNECT flags 0x%02x: clean start only, no will, user name or password",
            connect_flags))
    end
    info[#info + 1] = "peer " .. id .. (method and " (authenticating)" or " (no secret)")
    return kind, t
end

local function dissect_auth(r, body, body_end, t, st, from_client, info)
    if body >= body_end then
        t:add(F.auth_reason, r:range(0, 1), 0):set_generated()
        return
    end
    t:add(F.auth_reason, r:range(body, 1))
    if body + 1 >= body_end then return end
    local props, err = parse_properties(r, body + 1, body_end, t)
    if not props then
        t:add_proto_expert_info(E.packet, "Malformed AUTH properties: " .. err)
        return
    end
    local method = find_property(props, PROP_AUTH_METHOD)
    if method then
        local mt = t:add(F.auth_method, method.range, method.value)
        if method.value ~= AUTH_METHOD then
            mt:add_proto_expert_info(E.auth, "Authentication method is not " .. AUTH_METHOD)
        end
    end
    local data = find_property(props, PROP_AUTH_DATA)
    if not data or not data.vrange then
        t:add_proto_expert_info(E.auth, "AUTH without authentication data")
        return
    end
    local d, n = data.vrange, data.vlen
    if from_client == nil then from_client = (n == PROOF_LEN) end
    if from_client then
        local it = t:add(F.client_proof, d)
        if n ~= PROOF_LEN then
            it:add_proto_expert_info(E.auth, string.format("Client proof of %d bytes, %d expected",
                n, PROOF_LEN))
        end
        info[#info + 1] = "client proof"
        return
    end
    if n <= NONCE_LEN + PROOF_LEN then
        local it = t:add(F.auth_data, d)
        it:add_proto_expert_info(E.auth, string.format(
            "Server data of %d bytes: nonce (16) || proof (32) || identity expected", n))
        return
    end
    t:add(F.server_nonce, d:range(0, NONCE_LEN))
    t:add(F.server_proof, d:range(NONCE_LEN, PROOF_LEN))
    local sid = d:range(NONCE_LEN + PROOF_LEN):string(ENC_UTF_8)
    local it = t:add(F.server_id, d:range(NONCE_LEN + PROOF_LEN), sid)
    check_identity(it, sid)
    st.server_id = sid
    info[#info + 1] = "server nonce, proof, S=" .. sid
end

local function dissect_connack(r, body, body_end, t, st, info)
    if body + 2 > body_end then
        t:add_proto_expert_info(E.packet, "CONNACK shorter than 2 bytes")
        return
    end
    local reason = byte_at(r, body + 1)
    t:add(F.connack_reason, r:range(body + 1, 1))
    local props = {}
    if body + 2 < body_end then
        local err
        props, err = parse_properties(r, body + 2, body_end, t)
        if not props then
            t:add_proto_expert_info(E.packet, "Malformed CONNACK properties: " .. err)
            return
        end
    end
    local id
    for _, p in ipairs(props) do
        if p.id == PROP_USER and p.key == ID_PROPERTY then id = p break end
    end
    if id then
        local it = t:add(F.connack_id, id.range, id.value)
        check_identity(it, id.value)
        if st.server_id and st.server_id ~= id.value then
            it:add_proto_expert_info(E.id_mismatch, "mqtt-st-id " .. id.value ..
                " differs from the AUTH's server identity " .. st.server_id)
        end
        st.acceptor_id = id.value
        info[#info + 1] = "mqtt-st-id " .. id.value
    elseif reason == 0 then
        t:add_proto_expert_info(E.packet, "Successful peer CONNACK without mqtt-st-id")
    else
        info[#info + 1] = string.format("refused 0x%02x", reason)
    end
end

local function dissect_disconnect(r, body, body_end, t)
    if body >= body_end then
        t:add(F.disconnect_reason, r:range(0, 1), 0):set_generated()
        return
    end
    t:add(F.disconnect_reason, r:range(body, 1))
    if body + 1 < body_end then
        local props, err = parse_properties(r, body + 1, body_end, t)
        if not props then t:add_proto_expert_info(E.packet, "Malformed properties: " .. err) end
    end
end

-- The checks of section 3.4 on the BPDU bytes at off..off+len-1: nil or the reason key
local function bpdu_check(r, off, len)
    if len == 0 then return "empty" end
    if byte_at(r, off) ~= 1 then return "bad_version" end
    if len < BPDU_HEADER_LEN then return "too_short" end
    local flags = byte_at(r, off + 1)
    local role = math.floor(flags / 16) % 4
    if flags % 4 ~= 0 or role == 0 then return "bad_flags" end
    local root_len = (math.floor(flags / 8) % 2 == 1) and 18 or 6
    local sender_len = (math.floor(flags / 4) % 2 == 1) and 18 or 6
    local need = BPDU_HEADER_LEN + root_len + sender_len
    if len < need then return "truncated" end
    if len > need then return "trailing_bytes" end
    local root_off, sender_off = off + BPDU_HEADER_LEN, off + BPDU_HEADER_LEN + root_len
    if identity_problem(r, root_off, root_len) or identity_problem(r, sender_off, sender_len) then
        return "bad_id"
    end
    local age = byte_at(r, off + 2)
    local root_cap = r:range(off + 7, 4):uint()
    local cost = r:range(off + 11, 4):uint()
    local sender_cap = r:range(off + 15, 4):uint()
    local same = root_len == sender_len and
        r:range(root_off, root_len):bytes() == r:range(sender_off, sender_len):bytes()
    if same then
        if cost ~= 0 or age ~= 0 or root_cap ~= sender_cap or role == 1 then
            return "inconsistent"
        end
    elseif cost == 0 or age == 0 then
        return "inconsistent"
    end
    return nil
end

local function add_identity(t, who, r, off, len)
    local text = identity_text(r, off, len)
    local it = t:add(F[who], r:range(off, len), text)
    if len == 6 then
        it:add(F[who .. "_ip"], r:range(off, 4))
    else
        it:add(F[who .. "_ipv6"], r:range(off, 16))
    end
    it:add(F[who .. "_port"], r:range(off + len - 2, 2))
    local problem = identity_problem(r, off, len)
    if problem then it:append_text(" (" .. problem .. ")") end
    return text
end

local function dissect_bpdu(r, body, rl, t, st, from_client, info)
    if rl == 0 then
        t:add(F.bpdu_none, r:range(0, 2))
        return
    end
    local error_key = bpdu_check(r, body, rl)
    local bt = t:add(F.bpdu, r:range(body, rl))
    bt:set_text(string.format("BPDU (%d bytes)", rl))
    local b = r:range(body, rl)
    local n = rl
    local summary, sender_text = {}, nil
    bt:add(F.version, b:range(0, 1))
    if error_key ~= "bad_version" and n >= 2 then
        local flags = byte_at(b, 1)
        local ft = bt:add(F.flags, b:range(1, 1))
        ft:add(F.tc, b:range(1, 1))
        ft:add(F.tca, b:range(1, 1))
        ft:add(F.role, b:range(1, 1))
        ft:add(F.root_ipv6_flag, b:range(1, 1))
        ft:add(F.sender_ipv6_flag, b:range(1, 1))
        ft:add(F.reserved, b:range(1, 1))
        local role = math.floor(flags / 16) % 4
        bt:add(F.role_name, b:range(1, 1), ROLE_NAMES[role]):set_generated()
        summary[#summary + 1] = ROLE_NAMES[role]
        if math.floor(flags / 128) == 1 then summary[#summary + 1] = "TC" end
        if math.floor(flags / 64) % 2 == 1 then summary[#summary + 1] = "TCA" end
        if n >= 3 then bt:add(F.age, b:range(2, 1)) end
        if n >= 7 then bt:add(F.epoch, b:range(3, 4)) end
        if n >= 11 then bt:add(F.root_capability, b:range(7, 4)) end
        if n >= 15 then
            local ct = bt:add(F.root_cost, b:range(11, 4))
            if b:range(11, 4):uint() == 0xFFFFFFFF then ct:append_text(" (unreachable)") end
        end
        if n >= 19 then bt:add(F.sender_capability, b:range(15, 4)) end
        local root_len = (math.floor(flags / 8) % 2 == 1) and 18 or 6
        local sender_len = (math.floor(flags / 4) % 2 == 1) and 18 or 6
        local p = BPDU_HEADER_LEN
        if n >= p + root_len then
            local root = add_identity(bt, "root", b, p, root_len)
            summary[#summary + 1] = "root " .. root
            if n >= 15 then
                local cost = b:range(11, 4):uint()
                summary[#summary + 1] = cost == 0xFFFFFFFF and "unreachable" or
                    string.format("cost %d µs", cost)
            end
            p = p + root_len
            if n >= p + sender_len then
                sender_text = add_identity(bt, "sender", b, p, sender_len)
                summary[#summary + 1] = "from " .. sender_text
                p = p + sender_len
            end
        end
        if n > p and error_key == "trailing_bytes" then
            bt:add(F.trailing, b:range(p, n - p))
        end
        if n >= 7 then summary[#summary + 1] = "epoch " .. b:range(3, 4):uint() end
    end
    if error_key then
        local e = BPDU_ERRORS[error_key]
        bt:add(F.bpdu_valid, b:range(0, 1), false):set_generated()
        bt:add(F.bpdu_error, b:range(0, 1), error_key):set_generated()
        bt:add(F.bpdu_status, b:range(0, 1), e[1]):set_generated()
        bt:add_proto_expert_info(E["bpdu_" .. error_key])
        t:append_text(" (malformed: " .. error_key:gsub("_", " ") .. ")")
        info[#info + 1] = "malformed BPDU: " .. error_key:gsub("_", " ")
    else
        -- the sender of a BPDU is the dialler: names the link when the CONNECT was not seen
        if from_client and not st.dialler_id then st.guessed_id = sender_text end
        bt:add(F.bpdu_valid, b:range(0, 1), true):set_generated()
        bt:add(F.bpdu_status, b:range(0, 1), "STP_BPDU_OK"):set_generated()
        info[#info + 1] = "BPDU " .. table.concat(summary, ", ")
    end
end

-- "<identity> <incarnation> <sequence> <time ms> <qos>[ r]" (section 7.1): fields, or nil
local function parse_origin(value)
    local parts = {}
    for word in value:gmatch("[^ ]+") do parts[#parts + 1] = word end
    if value:find("  ", 1, true) or value:sub(1, 1) == " " or value:sub(-1) == " " then
        return nil, "blanks"
    end
    if #parts ~= 5 and #parts ~= 6 then return nil, "expected 5 or 6 fields" end
    local o = { id = parts[1], incarnation = parts[2], sequence = parts[3], time = parts[4],
                qos = parts[5], retained = parts[6] == "r" }
    if not is_identity_text(o.id) then return nil, "identity" end
    if not o.incarnation:match("^[0-9a-f]+$") or #o.incarnation ~= 16 then
        return nil, "incarnation (16 lower-case hex digits)"
    end
    if not o.sequence:match("^%d+$") or #o.sequence > 20 or o.sequence:match("^0+$") then
        return nil, "sequence (decimal from 1)"
    end
    if not o.time:match("^%d+$") or #o.time > 19 then return nil, "origin time" end
    if not o.qos:match("^[012]$") then return nil, "qos" end
    if #parts == 6 and parts[6] ~= "r" then return nil, "sixth field is not r" end
    return o
end

local function decimal_uint64(s)
    local v = UInt64(0)
    for i = 1, #s do v = v * 10 + tonumber(s:sub(i, i)) end
    return v
end

-- --------------------------------------------------------------------------- bridges (7.5)

-- The six lines every announcement starts with, in this order
local ANNOUNCE_HEADER = { "bridge", "fingerprint", "role", "health", "priority", "capability" }
local UINT64_MAX_TEXT = "18446744073709551615"

-- Decimal digits worth at most max (a number, or UINT64_MAX_TEXT), read as arbor reads them
-- (src/bridge/bridge_elect.c: 1 to 20 digits, leading zeros allowed)
local function decimal_at_most(s, max)
    if not s:match("^%d+$") or #s > 20 then return false end
    if max ~= UINT64_MAX_TEXT then return tonumber(s) <= max end
    local digits = s:gsub("^0+", "")
    return #digits < 20 or digits <= UINT64_MAX_TEXT
end

local function is_hex16(s) return #s == 16 and s:match("^[0-9a-f]+$") ~= nil end

-- The payload's lines: off and len (LF included) in the payload, text, lf (ends with LF),
-- fields (split at every blank, so that empty ones show): { text, off in the line }
local function announcement_lines(text)
    local lines, pos = {}, 1
    while pos <= #text do
        local nl = text:find("\n", pos, true)
        local stop = nl and nl - 1 or #text
        local line = { off = pos - 1, len = (nl or #text) - pos + 1, lf = nl ~= nil,
                       text = text:sub(pos, stop), fields = {} }
        local start = 1
        repeat
            local blank = line.text:find(" ", start, true)
            local last = blank and blank - 1 or #line.text
            line.fields[#line.fields + 1] = { text = line.text:sub(start, last), off = start - 1 }
            start = last + 2
        until not blank
        lines[#lines + 1] = line
        pos = stop + 2
    end
    return lines
end

-- What makes a line unreadable whatever it says (reason key, text), or nil
local function line_syntax_problem(line)
    if not line.lf then return "no_newline", "the last line does not end with LF" end
    for i = 1, #line.text do
        local c = line.text:byte(i)
        if c < 0x20 or c == 0x7F then
            return "control_character", string.format("control character 0x%02x", c)
        end
    end
    for _, f in ipairs(line.fields) do
        if f.text == "" then
            return "empty_field", "empty line, or a blank at its start or end or after another"
        end
    end
    return nil
end

-- A line read by its keyword (header lines and delivered): the values found, and when they
-- are not what section 7.5 allows, a reason key and text
local function decode_line(line)
    local f = line.fields
    local n, d = #f, { key = f[1].text }
    local a2, a3, a4 = f[2] and f[2].text or "", f[3] and f[3].text or "", f[4] and f[4].text or ""
    if d.key == "bridge" then
        if n ~= 2 or not a2:match("^%d+$") or #a2 > 9 then
            return d, "header", "bridge <version> expected"
        end
        d.version = tonumber(a2)
        if d.version ~= 1 then return d, "version", "format version " .. a2 .. ", not 1" end
    elseif d.key == "fingerprint" then
        if n ~= 2 or not is_hex16(a2) then
            return d, "header", "fingerprint of 16 lower-case hex digits expected"
        end
        d.fingerprint = a2
    elseif d.key == "role" then
        if n ~= 2 or (a2 ~= "holder" and a2 ~= "standby") then
            return d, "header", "role holder or role standby expected"
        end
        d.role = a2
    elseif d.key == "health" then
        if n == 2 and a2 == "ok" then
            d.health = a2
        elseif n == 3 and a2 == "failing" and decimal_at_most(a3, UINT64_MAX_TEXT) then
            d.health, d.failing_ms = a2, a3
        else
            return d, "header", "health ok or health failing <ms> expected"
        end
    elseif d.key == "priority" or d.key == "capability" then
        local max = d.key == "priority" and 65535 or 4294967295
        if n ~= 2 or not decimal_at_most(a2, max) then
            return d, "header", string.format("%s 0-%d expected", d.key, max)
        end
        d[d.key] = tonumber(a2)
    elseif d.key == "delivered" then
        if n ~= 4 or not is_identity_text(a2) or not is_hex16(a3) or
                not decimal_at_most(a4, UINT64_MAX_TEXT) or a4:match("^0+$") then
            return d, "delivered",
                "delivered <identity> <incarnation: 16 hex digits> <sequence from 1> expected"
        end
        d.id, d.incarnation, d.sequence = a2, a3, a4
    end
    return d
end

-- One line's item below the announcement at
local function show_announcement_line(at, pr, line, d, header)
    local lr = pr:range(line.off, line.len)
    local function value_range(i)
        local f = line.fields[i]
        if not f or f.text == "" then return lr end
        return pr:range(line.off + f.off, #f.text)
    end
    if d.version then return at:add(F.bridge_version, value_range(2), d.version) end
    if d.fingerprint then return at:add(F.bridge_fingerprint, value_range(2), d.fingerprint) end
    if d.role then return at:add(F.bridge_role, value_range(2), d.role) end
    if d.priority then return at:add(F.bridge_priority, value_range(2), d.priority) end
    if d.capability then return at:add(F.bridge_capability, value_range(2), d.capability) end
    if d.health then
        local it = at:add(F.bridge_health, value_range(2), d.health)
        if d.failing_ms then
            it:add(F.bridge_failing_ms, value_range(3), decimal_uint64(d.failing_ms))
            it:append_text(" (" .. d.failing_ms .. " ms)")
        end
        return it
    end
    if d.id then
        local it = at:add(F.bridge_delivered, lr, d.id .. " " .. d.incarnation .. " " .. d.sequence)
        it:add(F.bridge_delivered_id, value_range(2), d.id)
        it:add(F.bridge_delivered_incarnation, value_range(3), d.incarnation)
        it:add(F.bridge_delivered_sequence, value_range(4), decimal_uint64(d.sequence))
        return it
    end
    if not header and d.key ~= "delivered" then return at:add(F.bridge_unknown, lr, line.text) end
    return at:add(lr, "Line: " .. line.text)
end

-- A PUBLISH on $MQTT-ST/bridge/<name> (its topic at topic_off): the announcement of a
-- candidate for a bridge shared by the tree, in the payload at off, line by line, checked as
-- the brokers read it (they ignore a malformed one)
local function dissect_announcement(r, topic_off, topic_len, off, len, t, info)
    local name_off, name_len = topic_off + #ANNOUNCE_PREFIX, topic_len - #ANNOUNCE_PREFIX
    local name = name_len > 0 and r:range(name_off, name_len):string(ENC_UTF_8) or ""
    -- an empty payload has no range (a range may not start at the end): the topic stands in
    local pr = len > 0 and r:range(off, len) or r:range(topic_off, topic_len)
    local at = t:add(F.announcement, pr)
    at:set_text(string.format("Bridge announcement: %s (%d bytes)", name, len))
    local problems = {}
    local function problem(item, key, text) problems[#problems + 1] = { item, key, text } end
    if name_len > 0 then
        at:add(F.bridge_name, r:range(name_off, name_len), name)
    else
        problem(at, "no_name", "no bridge name after " .. ANNOUNCE_PREFIX)
    end
    local a, delivered = {}, {}
    local lines = len > 0 and announcement_lines(pr:raw()) or {}
    for i, line in ipairs(lines) do
        local header = i <= #ANNOUNCE_HEADER
        local d, key, text = { key = line.fields[1].text }, nil, nil
        if header or d.key == "delivered" then d, key, text = decode_line(line) end
        local item = show_announcement_line(at, pr, line, d, header)
        local syntax_key, syntax_text = line_syntax_problem(line)
        if syntax_key then
            key, text = syntax_key, syntax_text
        elseif header and d.key ~= ANNOUNCE_HEADER[i] then
            key, text = "header", ANNOUNCE_HEADER[i] .. " expected"
        end
        if key then problem(item, key, string.format("line %d: %s", i, text)) end
        if header then a[d.key] = d end
        if d.id then delivered[#delivered + 1] = item end
    end
    if #lines < #ANNOUNCE_HEADER then
        problem(at, "header", string.format("%d lines, the first six are required", #lines))
    end
    if a.role and a.role.role == "standby" then
        for _, item in ipairs(delivered) do
            item:add_proto_expert_info(E.bridge_standby_delivered)
        end
    end
    at:add(F.bridge_valid, pr, #problems == 0):set_generated()
    if #problems > 0 then
        at:add(F.bridge_error, pr, problems[1][2]):set_generated()
        for _, p in ipairs(problems) do
            p[1]:add_proto_expert_info(E.bridge_malformed,
                "Malformed bridge announcement (the brokers ignore it): " .. p[3])
        end
        info[#info + 1] = string.format("bridge %s: malformed (%s)", name, problems[1][2])
        return
    end
    local failing = a.health.failing_ms
    info[#info + 1] = string.format("bridge %s: %s, %s%s, %d delivered", name, a.role.role,
        a.health.health, failing and " " .. failing .. " ms" or "", #delivered)
end

-- --------------------------------------------------------------------------- resync (7.3.1)

-- glibc's inet_pton(AF_INET), which the brokers use: four decimal octets, no leading zeros.
-- The four bytes, or nil.
local function inet_pton4(s)
    local parts = {}
    for part in (s .. "."):gmatch("([^.]*)%.") do parts[#parts + 1] = part end
    if #parts ~= 4 then return nil end
    local bytes = {}
    for i, part in ipairs(parts) do
        if not part:match("^%d+$") or (#part > 1 and part:sub(1, 1) == "0") or
                #part > 3 or tonumber(part) > 255 then
            return nil
        end
        bytes[i] = tonumber(part)
    end
    return string.char(bytes[1], bytes[2], bytes[3], bytes[4])
end

-- glibc's inet_pton(AF_INET6): eight groups of at most four hex digits (either case), one
-- "::" that stands for at least one group, an IPv4 address in place of the last two. The 16
-- bytes, or nil.
local function inet_pton6(s)
    local n, i = #s, 1
    if n == 0 then return nil end
    if s:sub(1, 1) == ":" then
        if s:sub(2, 2) ~= ":" then return nil end
        i = 2
    end
    local groups, gap, token, digits, value = {}, nil, i, 0, 0
    while i <= n do
        local ch = s:sub(i, i)
        i = i + 1
        if ch:match("%x") then
            if digits == 4 then return nil end
            value, digits = value * 16 + tonumber(ch, 16), digits + 1
        elseif ch == ":" then
            token = i
            if digits == 0 then
                if gap then return nil end
                gap = #groups
            else
                if i > n or #groups == 8 then return nil end
                groups[#groups + 1] = value
                value, digits = 0, 0
            end
        elseif ch == "." and #groups <= 6 then
            local v4 = inet_pton4(s:sub(token))
            if not v4 then return nil end
            groups[#groups + 1] = v4:byte(1) * 256 + v4:byte(2)
            groups[#groups + 1] = v4:byte(3) * 256 + v4:byte(4)
            digits = 0
            break
        else
            return nil
        end
    end
    if digits > 0 then
        if #groups == 8 then return nil end
        groups[#groups + 1] = value
    end
    if gap then
        if #groups == 8 then return nil end
        local filled = {}
        for k = 1, gap do filled[#filled + 1] = groups[k] end
        for _ = 1, 8 - #groups do filled[#filled + 1] = 0 end
        for k = gap + 1, #groups do filled[#filled + 1] = groups[k] end
        groups = filled
    end
    if #groups ~= 8 then return nil end
    local bytes = {}
    for k, g in ipairs(groups) do
        bytes[2 * k - 1], bytes[2 * k] = math.floor(g / 256), g % 256
    end
    return string.char((table.unpack or unpack)(bytes))
end

local IPV4_MAPPED_PREFIX = string.rep("\0", 10) .. "\255\255"

-- The broker identity a run line names, read as the brokers read it
-- (stp_broker_id_from_text: "a.b.c.d:port" or "[address]:port", the port as strtoul reads
-- it, 1 to 65535, the address neither 0.0.0.0 nor ::): its 18 bytes (the address IPv6 or
-- IPv4-mapped, the port), the same for every spelling of one identity; or nil.
local function identity_key(text)
    local nul = text:find("\0", 1, true)
    if nul then text = text:sub(1, nul - 1) end -- read as a C string
    local host, port
    if text:sub(1, 1) == "[" then
        local close = text:find("]", 1, true)
        if not close or text:sub(close + 1, close + 1) ~= ":" then return nil end
        host, port = text:sub(2, close - 1), text:sub(close + 2)
    else
        local colon = text:find(":", 1, true)
        if not colon or text:find(":", colon + 1, true) then return nil end
        host, port = text:sub(1, colon - 1), text:sub(colon + 1)
    end
    if #host == 0 or #host >= 48 then return nil end
    -- strtoul: white space, a sign, then decimal digits up to the end; "-n" is never 1-65535
    local sign, digits = port:match("^[ \t\v\f\r]*([+-]?)(%d+)$")
    if not digits or sign == "-" then return nil end
    digits = digits:gsub("^0+", "")
    if #digits == 0 or #digits > 5 or tonumber(digits) > 65535 then return nil end
    local p = tonumber(digits)
    local v4 = inet_pton4(host)
    local addr = v4 and IPV4_MAPPED_PREFIX .. v4 or inet_pton6(host)
    if not addr then return nil end
    local unspecified = addr:sub(1, 12) == IPV4_MAPPED_PREFIX and addr:sub(13) == "\0\0\0\0" or
        addr == string.rep("\0", 16)
    if unspecified then return nil end
    return addr .. string.char(math.floor(p / 256), p % 256)
end

-- A decimal number as the brokers read it (any number of leading zeros, at most UINT64_MAX):
-- its digits without leading zeros ("0" for zero), or nil
local function uint64_digits(s)
    local digits = s:gsub("^0+", "")
    if digits == "" then return "0" end
    if #digits > 20 or (#digits == 20 and digits > UINT64_MAX_TEXT) then return nil end
    return digits
end

local function digits_less(a, b)
    if #a ~= #b then return #a < #b end
    return a < b
end

-- "<a>-<b>" or "<a>", comma-separated, ascending and apart, from 1 (peer_summary.c
-- parse_ranges): the ranges { lo, hi } (digit strings), or nil, a reason key and text
local function parse_ranges(s)
    local ranges, pos = {}, 1
    local function number()
        local text = s:match("^%d+", pos)
        if not text then return nil, "a decimal number expected at character " .. pos end
        pos = pos + #text
        local digits = uint64_digits(text)
        if not digits then return nil, text .. " is above " .. UINT64_MAX_TEXT end
        return digits
    end
    while pos <= #s do
        if #ranges > 0 then
            if s:sub(pos, pos) ~= "," then
                return nil, "ranges", "',' expected at character " .. pos
            end
            pos = pos + 1
        end
        local lo, why = number()
        if not lo then return nil, "ranges", why end
        if lo == "0" then return nil, "zero", "sequence number 0 (they start at 1)" end
        local hi = lo
        if s:sub(pos, pos) == "-" then
            pos = pos + 1
            hi, why = number()
            if not hi then return nil, "ranges", why end
        end
        if digits_less(hi, lo) then
            return nil, "backwards", string.format("range %s-%s runs backwards", lo, hi)
        end
        local last = ranges[#ranges]
        if last and not digits_less(last.hi, lo) then
            local shown = string.format("%s after %s-%s", lo, last.lo, last.hi)
            if digits_less(lo, last.lo) then
                return nil, "not_ascending", "ranges not ascending: " .. shown
            end
            return nil, "overlap", "ranges overlap: " .. shown
        end
        ranges[#ranges + 1] = { lo = lo, hi = hi }
    end
    if #ranges == 0 then return nil, "ranges", "no ranges" end
    return ranges
end

-- The header line of a summary (want|reply, fresh) or a lost notice: its values, or nil
-- (peer_summary.c parse_header: exactly these words, one blank apart)
local function parse_resync_header(f, kind)
    local words = {}
    for i, field in ipairs(f) do words[i] = field.text end
    if kind == "lost" or kind == "skip" then
        return (#words == 2 and words[1] == kind and words[2] == "1") and {} or nil
    end
    if (#words ~= 3 and #words ~= 4) or words[1] ~= "summary" or words[2] ~= "1" or
            (words[3] ~= "want" and words[3] ~= "reply") or
            (#words == 4 and words[4] ~= "fresh") then
        return nil
    end
    return { want = words[3] == "want", fresh = words[4] == "fresh" }
end

local RESYNC_HEADERS = { summary = "summary 1 want|reply [fresh]", lost = "lost 1",
                         skip = "skip 1" }

-- A run line "run <identity> <incarnation> <ranges>" (peer_summary.c parse_run): its values,
-- the 18 identity bytes and incarnation that name it (seen: those of the runs before it), or
-- nil, a reason key and text
local function parse_run_line(line, seen)
    local f = line.fields
    local run = { id = f[2] and f[2].text, incarnation = f[3] and f[3].text,
                  ranges_text = f[4] and f[4].text }
    local empty = false
    for _, field in ipairs(f) do empty = empty or field.text == "" end
    if #f ~= 4 or f[1].text ~= "run" or empty then
        return run, "run", "run <identity> <incarnation> <ranges> expected"
    end
    run.key = #run.id < 56 and identity_key(run.id) or nil
    if not run.key then
        return run, "identity", "not a broker identity (a.b.c.d:port or [address]:port): " ..
            run.id
    end
    if not is_hex16(run.incarnation) then
        return run, "incarnation", "incarnation of 16 lower-case hex digits expected"
    end
    run.key = run.key .. run.incarnation
    if seen[run.key] then
        return run, "duplicate", "run " .. run.id .. " " .. run.incarnation .. " listed twice"
    end
    local ranges, key, text = parse_ranges(run.ranges_text)
    if not ranges then return run, key, text end
    run.ranges = ranges
    run.count = UInt64(0)
    for _, r in ipairs(ranges) do
        run.count = run.count + (decimal_uint64(r.hi) - decimal_uint64(r.lo)) + 1
    end
    return run
end

-- "1 run", "2 runs" (n a number or a UInt64)
local function plural(n, word)
    return string.format("%s %s%s", tostring(n), word, tostring(n) == "1" and "" or "s")
end

local function show_run(at, pr, line, run)
    local lr = pr:range(line.off, #line.text > 0 and #line.text or line.len)
    local it = at:add(F.resync_run, lr, line.text)
    local function value_range(i)
        local f = line.fields[i]
        if not f or f.text == "" then return lr end
        return pr:range(line.off + f.off, #f.text)
    end
    if run.id then it:add(F.resync_run_id, value_range(2), run.id) end
    if run.incarnation then it:add(F.resync_run_incarnation, value_range(3), run.incarnation) end
    if run.ranges_text then it:add(F.resync_run_ranges, value_range(4), run.ranges_text) end
    if run.ranges then
        it:add(F.resync_run_count, value_range(4), run.count):set_generated()
        it:add(F.resync_run_first, value_range(4), decimal_uint64(run.ranges[1].lo))
            :set_generated()
        it:add(F.resync_run_last, value_range(4), decimal_uint64(run.ranges[#run.ranges].hi))
            :set_generated()
        it:set_text(string.format("Run %s %s: %s (%s)", run.id, run.incarnation,
            run.ranges_text, plural(run.count, "sequence number")))
    end
    return it
end

-- Whether s is well-formed UTF-8 as MQTT wants it (utf8_is_valid_mqtt): no U+0000, no
-- surrogates, no overlong forms, nothing above U+10FFFF
local function valid_mqtt_utf8(s)
    local i, n = 1, #s
    while i <= n do
        local c = s:byte(i)
        local need, min
        if c == 0 then return false
        elseif c < 0x80 then need, min = 0, 0
        elseif c >= 0xC2 and c <= 0xDF then need, min = 1, 0x80
        elseif c >= 0xE0 and c <= 0xEF then need, min = 2, 0x800
        elseif c >= 0xF0 and c <= 0xF4 then need, min = 3, 0x10000
        else return false end
        if i + need > n then return false end
        local cp = need == 0 and c or (c % (2 ^ (6 - need)))
        for k = 1, need do
            local b = s:byte(i + k)
            if b < 0x80 or b > 0xBF then return false end
            cp = cp * 64 + (b - 0x80)
        end
        if cp < min or cp > 0x10FFFF or (cp >= 0xD800 and cp <= 0xDFFF) then return false end
        i = i + need + 1
    end
    return true
end

-- Whether s is a topic filter (topic_filter_is_valid): not empty, '#' only as the whole last
-- level, '+' only as a whole level, at most 200 '/'
local function valid_topic_filter(s)
    if s == "" then return false end
    local levels = {}
    for level in (s .. "/"):gmatch("([^/]*)/") do levels[#levels + 1] = level end
    if #levels > 201 then return false end
    for k, level in ipairs(levels) do
        if level:find("#", 1, true) and (level ~= "#" or k ~= #levels) then return false end
        if level:find("+", 1, true) and level ~= "+" then return false end
    end
    return true
end

-- The start of a link payload checked as its C parser reads it: the tree item (on the
-- payload at off, or on the topic when it is empty) and a checker whose fail(item, text) flags
-- the first problem with expert (its text after `what`); the checker's problem holds it.
local function checked_payload(r, topic_range, off, len, t, field, expert, what)
    local pr = len > 0 and r:range(off, len) or nil
    local whole = pr or topic_range
    local check = {}
    function check.fail(item, text)
        if not check.problem then
            check.problem = text
            item:add_proto_expert_info(expert, what .. text)
        end
    end
    return pr, whole, t:add(field, whole), check
end

-- The end of a checked payload: valid, and when it is not the problem as error, in the
-- item's text (label) and the Info column (tag). True when it was malformed.
local function malformed_end(at, whole, check, valid_field, error_field, label, tag, info)
    at:add(valid_field, whole, check.problem == nil):set_generated()
    if not check.problem then return false end
    at:add(error_field, whole, check.problem):set_generated()
    at:set_text(label .. ": malformed, " .. check.problem)
    info[#info + 1] = tag .. ": malformed (" .. check.problem .. ")"
    return true
end

local INTEREST_KINDS = { [0] = "full", [1] = "update", [2] = "request" }

-- A PUBLISH on $MQTT-ST/link/interest: the binary announcement (section 7.7) in the payload
-- at off, checked as peer_interest_parse reads it (the brokers close the connection on a
-- malformed one)
local function dissect_interest(r, topic_range, off, len, t, info)
    local pr, whole, at, check = checked_payload(r, topic_range, off, len, t, F.interest,
        E.interest_malformed,
        "Malformed interest announcement (the broker closes the connection, 0x81): ")
    local fail = check.fail
    if len < 7 then
        fail(at, "the header needs 7 bytes, the payload has " .. len)
    end
    local kind, generation, flags, adds, removes = nil, 0, 0, 0, 0
    if not check.problem then
        local version = pr:range(0, 1):uint()
        at:add(F.interest_version, pr:range(0, 1))
        if version ~= 1 then fail(at, "version " .. version .. ", not 1") end
        kind = INTEREST_KINDS[pr:range(1, 1):uint()]
        at:add(F.interest_kind, pr:range(1, 1), kind or ("unknown " .. pr:range(1, 1):uint()))
        if not kind then fail(at, "unknown kind " .. pr:range(1, 1):uint()) end
        generation = pr:range(2, 4):uint()
        at:add(F.interest_generation, pr:range(2, 4))
        flags = pr:range(6, 1):uint()
        at:add(F.interest_everything, pr:range(6, 1), flags % 2 == 1)
        at:add(F.interest_carried, pr:range(6, 1), math.floor(flags / 2) % 2 == 1)
        if flags > 3 then fail(at, string.format("unknown flags 0x%02x", flags)) end
    end
    local pos = 7
    local no_entries = kind == "request" or flags % 2 == 1
    while not check.problem and pos < len do
        if no_entries then
            fail(at, kind == "request" and "entries in a request" or "entries after everything")
            break
        end
        if len - pos < 3 then fail(at, "an entry cut short at byte " .. pos) break end
        local op = pr:range(pos, 1):uint()
        local flen = pr:range(pos + 1, 2):uint()
        if flen > len - pos - 3 then
            fail(at, string.format("a filter of %d bytes runs past the payload at byte %d", flen,
                pos))
            break
        end
        local fr = flen > 0 and pr:range(pos + 3, flen) or pr:range(pos + 1, 2)
        local text = flen > 0 and fr:raw() or ""
        local item
        if op == 1 then
            item = at:add(F.interest_add, pr:range(pos, 3 + flen), text)
            adds = adds + 1
        elseif op == 2 then
            item = at:add(F.interest_remove, pr:range(pos, 3 + flen), text)
            removes = removes + 1
        else
            item = at:add(pr:range(pos, 1), string.format("Unknown operation 0x%02x", op))
            fail(item, string.format("unknown operation 0x%02x", op))
        end
        if not check.problem and op == 2 and kind == "full" then
            fail(item, "a remove in a full announcement")
        end
        if not check.problem and not valid_mqtt_utf8(text) then
            fail(item, "a filter that is not UTF-8 as MQTT wants it")
        end
        if not check.problem and not valid_topic_filter(text) then
            fail(item, "not a topic filter: " .. text)
        end
        pos = pos + 3 + flen
    end
    at:add(F.interest_adds, whole, adds):set_generated()
    at:add(F.interest_removes, whole, removes):set_generated()
    if malformed_end(at, whole, check, F.interest_valid, F.interest_error,
                     "Interest announcement", "interest", info) then
        return
    end
    local what
    if kind == "request" then
        what = "request for a full announcement"
    elseif flags % 2 == 1 then
        what = string.format("%s %d: everything", kind, generation)
    elseif kind == "full" then
        what = string.format("full %d: %s", generation, plural(adds, "filter"))
    else
        what = string.format("update %d: +%d -%d%s", generation, adds, removes,
            math.floor(flags / 2) % 2 == 1 and ", carried" or "")
    end
    at:set_text("Interest announcement: " .. what)
    info[#info + 1] = "interest " .. what
end

-- ------------------------------------------------------------------ shared groups (7.9)

-- Why s (bytes) is not a shared group's key "<group>/<filter>" (peer_share_key_is_valid: a
-- group up to the first '/', not empty, without '+' or '#', then a topic filter; UTF-8 as
-- MQTT wants it), or nil when it is one
local function share_key_problem(s)
    if not valid_mqtt_utf8(s) then return "not UTF-8 as MQTT wants it" end
    local slash = s:find("/", 1, true)
    if not slash then return "no '/' after the group" end
    if slash == 1 then return "an empty group" end
    if s:sub(1, slash - 1):find("[+#]") then return "'+' or '#' in the group" end
    if not valid_topic_filter(s:sub(slash + 1)) then return "the filter is not a topic filter" end
    return nil
end

-- The group and the filter of a valid key
local function share_key_parts(s)
    local slash = s:find("/", 1, true)
    return s:sub(1, slash - 1), s:sub(slash + 1)
end

-- Byte order of keys (peer_share_key_compare: memcmp, a shorter prefix first): -1, 0 or 1.
-- Not Lua's < on strings, which follows the locale.
local function share_key_compare(a, b)
    for i = 1, math.min(#a, #b) do
        local x, y = a:byte(i), b:byte(i)
        if x ~= y then return x < y and -1 or 1 end
    end
    if #a == #b then return 0 end
    return #a < #b and -1 or 1
end

-- A PUBLISH on $MQTT-ST/link/shares: the whole table of the shared groups the sender knows of
-- (section 7.9) in the payload at off, checked as peer_share_parse reads it (the brokers
-- close the connection on a malformed one)
local function dissect_shares(r, topic_range, off, len, t, info)
    local pr, whole, at, check = checked_payload(r, topic_range, off, len, t, F.shares,
        E.shares_malformed,
        "Malformed shared-group table (the broker closes the connection, 0x81): ")
    local fail = check.fail
    if len < 1 then
        fail(at, "no version byte (an empty payload)")
    else
        local version = pr:range(0, 1):uint()
        at:add(F.shares_version, pr:range(0, 1))
        if version ~= 1 then fail(at, "version " .. version .. ", not 1") end
    end
    local pos, count, previous = 1, 0, nil
    while not check.problem and pos < len do
        if len - pos < 3 then fail(at, "an entry cut short at byte " .. pos) break end
        local distance = pr:range(pos, 1):uint()
        local klen = pr:range(pos + 1, 2):uint()
        local far = distance > SHARE_DISTANCE_MAX
        local far_text = string.format("distance %d at byte %d, above %d", distance, pos,
            SHARE_DISTANCE_MAX)
        if klen > len - pos - 3 then
            if far then
                fail(at:add(F.shares_distance, pr:range(pos, 1)), far_text)
            else
                fail(at, string.format("a key of %d bytes runs past the payload at byte %d",
                    klen, pos))
            end
            break
        end
        local kr = klen > 0 and pr:range(pos + 3, klen) or pr:range(pos + 1, 2)
        local key = klen > 0 and kr:raw() or ""
        local et = at:add(F.shares_entry, pr:range(pos, 3 + klen))
        et:set_text(string.format("Entry: %s, distance %d", key, distance))
        local dt = et:add(F.shares_distance, pr:range(pos, 1))
        et:add(F.shares_key, kr, key)
        count = count + 1
        if far then fail(dt, far_text) end
        local why = share_key_problem(key)
        if why then
            fail(et, why == "not UTF-8 as MQTT wants it" and "a key that is " .. why or
                "not a key: " .. key .. " (" .. why .. ")")
        else
            local group, filter = share_key_parts(key)
            et:add(F.shares_group, kr, group):set_generated()
            et:add(F.shares_filter, kr, filter):set_generated()
        end
        if not check.problem and previous then
            local order = share_key_compare(previous, key)
            if order == 0 then
                fail(et, "key " .. key .. " repeated")
            elseif order > 0 then
                fail(et, "keys out of order: " .. key .. " after " .. previous)
            end
        end
        previous = key
        pos = pos + 3 + klen
    end
    at:add(F.shares_count, whole, count):set_generated()
    if malformed_end(at, whole, check, F.shares_valid, F.shares_error, "Shared-group table",
                     "shares", info) then
        return
    end
    local what = count == 0 and "empty (every group withdrawn)" or plural(count, "group")
    at:set_text("Shared-group table: " .. what)
    info[#info + 1] = "shares: " .. what
end

-- A PUBLISH on $MQTT-ST/link/<kind> (its topic at topic_off), a link-local packet without
-- origin: a summary or lost notice (section 7.3.1) or a skip notice (7.8) in the payload at
-- off, checked line by line as the brokers read it (they close the connection on a malformed
-- one); another kind is a later version's, which the brokers ignore
local function dissect_resync(r, topic_off, topic_len, off, len, t, info)
    local kind = r:range(topic_off + #LINK_PREFIX, topic_len - #LINK_PREFIX):string(ENC_UTF_8)
    if kind == "interest" then
        return dissect_interest(r, r:range(topic_off, topic_len), off, len, t, info)
    end
    if kind == "shares" then
        return dissect_shares(r, r:range(topic_off, topic_len), off, len, t, info)
    end
    local pr = len > 0 and r:range(off, len) or r:range(topic_off, topic_len)
    local at = t:add(F.resync, pr)
    at:add(F.resync_kind, r:range(topic_off + #LINK_PREFIX, topic_len - #LINK_PREFIX), kind)
    if not RESYNC_HEADERS[kind] then
        at:set_text("Link-local packet " .. LINK_PREFIX .. kind ..
            " (another version's: the brokers ignore it)")
        at:add_proto_expert_info(E.resync_other)
        info[#info + 1] = "link-local " .. kind .. " (ignored)"
        return
    end
    local problems = {}
    local function problem(item, key, text) problems[#problems + 1] = { item, key, text } end
    local lines = len > 0 and announcement_lines(pr:raw()) or {}
    local header, seen, runs, run_lines, total = nil, {}, 0, 0, UInt64(0)
    for i, line in ipairs(lines) do
        local item, key, text
        if i == 1 then
            header = parse_resync_header(line.fields, kind)
            item = at:add(pr:range(line.off, line.len), "Header: " .. line.text)
            local version = line.fields[2]
            if version and version.text:match("^%d+$") and #version.text <= 9 then
                item:add(F.resync_version, pr:range(line.off + version.off, #version.text),
                    tonumber(version.text))
            end
            if header and kind == "summary" then
                item:add(F.resync_want, pr:range(line.off + line.fields[3].off,
                    #line.fields[3].text), header.want)
                local fresh = line.fields[4]
                if fresh then
                    item:add(F.resync_fresh, pr:range(line.off + fresh.off, #fresh.text), true)
                else
                    item:add(F.resync_fresh, pr:range(line.off, line.len), false)
                        :set_generated()
                end
            end
            if not header then key, text = "header", RESYNC_HEADERS[kind] .. " expected" end
        else
            local run
            run, key, text = parse_run_line(line, seen)
            item = show_run(at, pr, line, run)
            run_lines = run_lines + 1
            if not key then
                seen[run.key] = true
                runs, total = runs + 1, total + run.count
            end
        end
        if not line.lf then key, text = "no_newline", "the last line does not end with LF" end
        if key then problem(item, key, string.format("line %d: %s", i, text)) end
    end
    if #lines == 0 then
        problem(at, "header", "empty payload: " .. RESYNC_HEADERS[kind] .. " expected")
    elseif kind ~= "summary" and run_lines == 0 then
        problem(at, "no_run", "a " .. kind .. " notice without a run")
    end
    at:add(F.resync_runs, pr, runs):set_generated()
    at:add(F.resync_count, pr, total):set_generated()
    at:add(F.resync_valid, pr, #problems == 0):set_generated()
    local title = kind == "summary" and "summary" or kind .. " notice"
    if #problems > 0 then
        at:add(F.resync_error, pr, problems[1][2]):set_generated()
        for _, p in ipairs(problems) do
            p[1]:add_proto_expert_info(E.resync_malformed,
                "Malformed resync packet (the broker closes the connection, 0x81): " .. p[3])
        end
        at:set_text(string.format("Resync %s: malformed, %s (%d bytes)", title,
            problems[1][2], len))
        info[#info + 1] = string.format("resync %s: malformed (%s)", kind, problems[1][2])
        return
    end
    if kind == "skip" then    -- section 7.8: left out by interest, not lost
        at:set_text(string.format("Skip notice: %s in %s left out by interest (%d bytes)",
            plural(total, "sequence number"), plural(runs, "run"), len))
        info[#info + 1] = string.format("skip: %s%s", plural(total, "message"),
            runs > 1 and ", " .. plural(runs, "run") or "")
        return
    end
    if kind == "lost" then
        at:set_text(string.format("Resync lost notice: %s in %s (%d bytes)",
            plural(total, "sequence number"), plural(runs, "run"), len))
        info[#info + 1] = string.format("resync lost: %s%s", plural(total, "message"),
            runs > 1 and ", " .. plural(runs, "run") or "")
        return
    end
    local how = (header.want and "want" or "reply") .. (header.fresh and ", fresh" or "")
    at:set_text(string.format("Resync summary: %s, %s, %s (%d bytes)", how,
        plural(runs, "run"), plural(total, "sequence number"), len))
    info[#info + 1] = string.format("resync summary (%s, %s)", how, plural(runs, "run"))
end

-- The mqtt-st-bridge user property: the one right after the origin names the bridge the
-- message came in over (7.5); anywhere else the brokers do not take it for that
local function show_bridge_from(props, origin, t, info)
    local previous
    for _, prop in ipairs(props) do
        if prop.id == PROP_USER then
            if prop.key == BRIDGE_PROPERTY then
                if origin and previous == origin then
                    local it = t:add(F.bridge_from, prop.range, prop.value)
                    if prop.value == "" then it:add_proto_expert_info(E.bridge_from_empty) end
                    info[#info + 1] = "via bridge " .. prop.value
                else
                    t:add_proto_expert_info(E.bridge_from_misplaced)
                end
            end
            previous = prop
        end
    end
end

-- The mqtt-st-share user properties (7.9): read as find_origin (peer_flood.c) reads them,
-- those among the user properties right after the origin and the bridge property (one that
-- follows a mark is none) are marks, each giving the message the shared group it names;
-- anywhere else the brokers do not take them for marks
local function show_share_marks(props, origin, t, info)
    local state, bridge_allowed = "before", false   -- before, marks (after the origin), after
    local marks, first, shown = 0, nil, {}
    for _, prop in ipairs(props) do
        if prop.id == PROP_USER then
            if state == "marks" and prop.key == BRIDGE_PROPERTY and bridge_allowed then
                bridge_allowed = false
            elseif state == "marks" and prop.key == SHARE_PROPERTY then
                marks, bridge_allowed = marks + 1, false
                local it = t:add(F.share_mark, prop.range, prop.value)
                first = first or prop
                local key = prop.vrange and prop.vrange:raw() or ""
                local why = share_key_problem(key)
                if why then
                    it:add_proto_expert_info(E.share_mark_invalid,
                        "mqtt-st-share value is not a shared group's key (the broker closes " ..
                        "the connection, 0x82): " .. why)
                else
                    local group, filter = share_key_parts(key)
                    it:add(F.share_mark_group, prop.vrange, group):set_generated()
                    it:add(F.share_mark_filter, prop.vrange, filter):set_generated()
                end
                if marks == SHARE_MARKS_MAX + 1 then
                    it:add_proto_expert_info(E.share_mark_too_many)
                end
                if marks <= 3 then shown[#shown + 1] = prop.value end
            elseif prop.key == SHARE_PROPERTY then
                t:add_proto_expert_info(E.share_mark_misplaced,
                    "mqtt-st-share is not among the user properties that follow " ..
                    "mqtt-st-origin (the brokers do not take it for a mark): " .. prop.value)
            elseif state == "before" and prop == origin then
                state, bridge_allowed = "marks", true
            elseif state == "marks" then
                state = "after"
            end
        end
    end
    if marks == 0 then return end
    t:add(F.share_marks, first.range, marks):set_generated()
    info[#info + 1] = marks <= 3 and "marked " .. table.concat(shown, ", ") or
        "marked for " .. plural(marks, "shared group")
end

local function dissect_publish(r, b0, body, body_end, t, info)
    local qos = math.floor(b0 / 2) % 4
    if body + 2 > body_end then
        t:add_proto_expert_info(E.packet, "PUBLISH without a topic")
        return
    end
    local tlen = u16_at(r, body)
    local p = body + 2 + tlen
    if p > body_end then
        t:add_proto_expert_info(E.packet, "Topic runs past the packet")
        return
    end
    local topic = tlen > 0 and r:range(body + 2, tlen):string(ENC_UTF_8) or ""
    -- a link-local packet (a resync's, 7.3.1) has no origin: the brokers do not look for one
    local topic_bytes = tlen > 0 and r:range(body + 2, tlen):raw() or ""
    local link_local = tlen > #LINK_PREFIX and topic_bytes:sub(1, #LINK_PREFIX) == LINK_PREFIX
    if tlen > 0 then t:add(F.topic, r:range(body + 2, tlen), topic) end
    if qos > 0 then
        if p + 2 > body_end then return end
        t:add(F.packet_id, r:range(p, 2))
        p = p + 2
    end
    local props, after = parse_properties(r, p, body_end, t)
    if not props then
        t:add_proto_expert_info(E.packet, "Malformed PUBLISH properties: " .. after)
        return
    end
    if link_local then
        if after < body_end then t:add(F.payload, r:range(after, body_end - after)) end
        dissect_resync(r, body + 2, tlen, after, body_end - after, t, info)
        return
    end
    local origin, first_user
    for _, prop in ipairs(props) do
        if prop.id == PROP_USER then
            if not first_user then first_user = prop end
            if prop.key == ORIGIN_PROPERTY then origin = prop break end
        end
    end
    if not origin then
        t:add_proto_expert_info(E.origin_missing)
        info[#info + 1] = "no origin"
    else
        local ot = t:add(F.origin, origin.range, origin.value)
        if origin ~= first_user then ot:add_proto_expert_info(E.origin_not_first) end
        local o, why = parse_origin(origin.value)
        if not o then
            ot:add_proto_expert_info(E.origin_malformed, "Malformed mqtt-st-origin value: " .. why)
        else
            local vr = origin.vrange
            ot:add(F.origin_id, vr, o.id)
            ot:add(F.origin_incarnation, vr, o.incarnation)
            ot:add(F.origin_sequence, vr, decimal_uint64(o.sequence))
            ot:add(F.origin_time_ms, vr, decimal_uint64(o.time))
            local ms = tonumber(o.time)
            ot:add(F.origin_time, vr, NSTime.new(math.floor(ms / 1000), (ms % 1000) * 1000000))
            ot:add(F.origin_qos, vr, tonumber(o.qos))
            ot:add(F.origin_retained, vr, o.retained)
            info[#info + 1] = string.format("origin %s #%s QoS %s%s", o.id, o.sequence, o.qos,
                o.retained and " r" or "")
        end
    end
    show_bridge_from(props, origin, t, info)
    show_share_marks(props, origin, t, info)
    if after < body_end then t:add(F.payload, r:range(after, body_end - after)) end
    if topic:sub(1, #ANNOUNCE_PREFIX) == ANNOUNCE_PREFIX then
        dissect_announcement(r, body + 2, tlen, after, body_end - after, t, info)
    end
end

-- Does this PUBLISH, read in MQTT 5 framing, carry the mqtt-st-origin user property?
local function publish_has_origin(r, b0, body, body_end)
    if body + 2 > body_end then return false end
    local p = body + 2 + u16_at(r, body) + ((math.floor(b0 / 2) % 4 > 0) and 2 or 0)
    if p >= body_end then return false end
    local props = parse_properties(r, p, body_end, nil)
    for _, prop in ipairs(props or {}) do
        if prop.id == PROP_USER and prop.key == ORIGIN_PROPERTY then return true end
    end
    return false
end

-- One MQTT PDU (r spans it exactly) of the frame; idx is its position among them
local function dissect_pdu(r, idx, pinfo, tree, info)
    local len = r:len()
    if len < 2 then return false end
    local b0 = byte_at(r, 0)
    local ptype = math.floor(b0 / 16)
    local rl, vl = varint_at(r, 1)
    if not rl then return false end
    local body = 1 + vl
    local body_end = math.min(body + rl, len)
    local skey = stream_key(pinfo)
    local st = streams[skey]
    if not st then
        st = {}
        streams[skey] = st
    end
    local dkey = tostring(pinfo.number) .. ":" .. idx
    local d = decisions[dkey]
    if not d then
        -- first pass: decide what this PDU is, from the connection as seen so far
        d = {}
        if ptype == PT_CONNECT then
            d.connect, d.from_client = true, true
        else
            if not st.kind then
                local guess = ptype == PT_PINGREQ and (rl == 31 or rl == 43 or rl == 55) and
                    body < len and byte_at(r, body) == 1
                if not guess and ptype == PT_PUBLISH then
                    guess = publish_has_origin(r, b0, body, body_end)
                end
                if guess then
                    st.kind, st.dialler = "peer", endpoint(pinfo, "src")
                end
            end
            d.kind = st.kind
            if st.dialler then d.from_client = (endpoint(pinfo, "src") == st.dialler) end
        end
        decisions[dkey] = d
    end
    local t, kind
    if d.connect then
        kind, t = dissect_connect(r, body, body_end, tree, st, info)
        if not pinfo.visited and kind then
            st.kind, st.dialler = kind, endpoint(pinfo, "src")
        end
        if kind ~= "peer" then return false end
    else
        if d.kind ~= "peer" then return false end
        t = new_tree(tree, r, ptype == PT_PINGREQ and (rl > 0 and "BPDU" or
            "PINGREQ without BPDU") or PACKET_NAMES[ptype] or ("packet type " .. ptype))
        if ptype == PT_PINGREQ then
            dissect_bpdu(r, body, body_end - body, t, st, d.from_client, info)
        elseif ptype == PT_AUTH then
            dissect_auth(r, body, body_end, t, st, d.from_client, info)
        elseif ptype == PT_CONNACK then
            dissect_connack(r, body, body_end, t, st, info)
        elseif ptype == PT_PUBLISH then
            dissect_publish(r, b0, body, body_end, t, info)
        elseif ptype == PT_DISCONNECT then
            dissect_disconnect(r, body, body_end, t)
        end
    end
    -- the link this connection belongs to, named by the identities of its two ends
    local dialler = st.dialler_id or st.guessed_id
    local acceptor = st.acceptor_id or st.server_id
    if dialler then t:add(F.link_dialler, r:range(0, 1), dialler):set_generated() end
    if acceptor then t:add(F.link_acceptor, r:range(0, 1), acceptor):set_generated() end
    if d.from_client ~= nil then
        t:add(F.link_direction, r:range(0, 1), d.from_client and "dialler to acceptor" or
            "acceptor to dialler"):set_generated()
    end
    return true
end

-- --------------------------------------------------------------------------- hooks

local f_mqtt = Field.new("mqtt")

function mqttst.dissector(tvb, pinfo, tree)
    local pdus = { f_mqtt() }
    if #pdus == 0 then return end
    local info, peer = {}, false
    for idx, fi in ipairs(pdus) do
        local r = fi.range
        if r then
            local ok, result = pcall(dissect_pdu, r, idx, pinfo, tree, info)
            if not ok then
                -- on an item of its own: an expert info on the root tree shows in no tree
                tree:add(mqttst, r):add_proto_expert_info(E.packet,
                    "MQTT-ST dissector error: " .. tostring(result))
            elseif result then
                peer = true
            end
        end
    end
    if peer then
        pinfo.cols.protocol:set("MQTT-ST")
        if #info > 0 then pinfo.cols.info:append(" [" .. table.concat(info, "; ") .. "]") end
    end
end

register_postdissector(mqttst)

-- Peer connections use any port: recognise their first packet (a peer CONNECT), or a PINGREQ
-- carrying a BPDU (section 2: 0xC0, remaining length 31, 43 or 55, version 1) when the
-- capture began later, and hand the server's port to the MQTT dissector from then on. Peer
-- links over TLS look the same once Wireshark decrypts them (tls.keylog_file, filled from
-- the brokers' SSLKEYLOGFILE): the same heuristic on the decrypted stream, which then hands
-- the port to MQTT inside TLS.
local function make_heuristic(port_table)
    local heuristic_ports = {}
    return function(tvb, pinfo, tree)
        local n = tvb:len()
        if n < 3 then return false end
        local b0 = tvb(0, 1):uint()
        if b0 == 0x10 then
            local rl, vl = varint_at(tvb(0), 1)
            local p = vl and 1 + vl
            if not p or n < p + 7 or tvb(p, 2):uint() ~= 4 or tvb(p + 2, 4):string() ~= "MQTT" or
                    tvb(p + 6, 1):uint() ~= PEER_LEVEL then
                return false
            end
        elseif b0 == 0xC0 then
            local rl = tvb(1, 1):uint()
            if (rl ~= 31 and rl ~= 43 and rl ~= 55) or tvb(2, 1):uint() ~= 1 then return false end
        else
            return false
        end
        local port = pinfo.dst_port
        if not heuristic_ports[port] then
            heuristic_ports[port] = true
            port_table:add(port, mqtt_handle)
        end
        mqtt_handle:call(tvb, pinfo, tree)
        return true
    end
end

mqttst:register_heuristic("tcp", make_heuristic(tcp_ports))
mqttst:register_heuristic("tls", make_heuristic(DissectorTable.get("tls.port")))
