/*
 * peer_auth.c: the MQTT-ST peer authentication, a mutual HMAC-SHA256 challenge-response over
 * MQTT 5 enhanced authentication (method "MQTT-ST-HMAC-SHA256", docs/mqtt-st-protocol.md).
 * Both sides prove they hold the shared secret by keying an HMAC over both nonces and both
 * identities; the secret itself never crosses the wire, and fresh nonces on both sides make a
 * recorded exchange useless. Pure functions over OpenSSL: no state, no sockets.
 */
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "peer_net.h"

int peer_auth_nonce(uint8_t nonce[PEER_NONCE_LEN])
{
    return getrandom(nonce, PEER_NONCE_LEN, 0) == PEER_NONCE_LEN ? 0 : -1;
}

int peer_auth_proof(const char *secret, bool from_server, const uint8_t client_nonce[PEER_NONCE_LEN],
                    const uint8_t server_nonce[PEER_NONCE_LEN], const char *client_id,
                    const char *server_id, uint8_t proof[PEER_PROOF_LEN])
{
    /* The label keeps a server's proof from being replayed as a client's. */
    const char *label = from_server ? "mqtt-st server" : "mqtt-st client";
    uint8_t data[64 + 2 * PEER_NONCE_LEN + 2 * STP_BROKER_ID_STRLEN];
    size_t label_len = strlen(label) + 1, client_len = strlen(client_id) + 1;
    size_t server_len = strlen(server_id);
    if (label_len + 2 * PEER_NONCE_LEN + client_len + server_len > sizeof data) return -1;
    size_t n = 0;
    memcpy(data + n, label, label_len);
    n += label_len;
    memcpy(data + n, client_nonce, PEER_NONCE_LEN);
    n += PEER_NONCE_LEN;
    memcpy(data + n, server_nonce, PEER_NONCE_LEN);
    n += PEER_NONCE_LEN;
    memcpy(data + n, client_id, client_len);
    n += client_len;
    memcpy(data + n, server_id, server_len);
    n += server_len;
    unsigned int out_len = 0;
    if (!HMAC(EVP_sha256(), secret, (int)strlen(secret), data, n, proof, &out_len) ||
        out_len != PEER_PROOF_LEN)
        return -1;
    return 0;
}

bool peer_auth_check(const char *secret, bool from_server,
                     const uint8_t client_nonce[PEER_NONCE_LEN],
                     const uint8_t server_nonce[PEER_NONCE_LEN], const char *client_id,
                     const char *server_id, const uint8_t *proof, size_t proof_len)
{
    uint8_t expected[PEER_PROOF_LEN];
    if (proof_len != PEER_PROOF_LEN) return false;
    if (peer_auth_proof(secret, from_server, client_nonce, server_nonce, client_id, server_id,
                        expected) != 0)
        return false;
    return CRYPTO_memcmp(expected, proof, PEER_PROOF_LEN) == 0;
}
