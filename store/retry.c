#include "retry.h"

#include <curl/curl.h>
#include <string.h>

int vdn_retry_is_retryable(int curl_code, long http_status, const char *s3_code) {
    switch (curl_code) {
    case CURLE_OK:
        break;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_CONNECT:
    case CURLE_OPERATION_TIMEDOUT:
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
    case CURLE_GOT_NOTHING:
    case CURLE_PARTIAL_FILE:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
        return 1;
    default:
        return 0; /* bad URL, bad option, local file error, aborted by callback: not transient */
    }
    if (http_status >= 500 && http_status <= 599) return 1;
    if (http_status == 429) return 1;
    if (s3_code) {
        static const char *transient[] = {"SlowDown",       "InternalError",
                                          "RequestTimeout", "ServiceUnavailable",
                                          "Throttling",     "ThrottlingException"};
        for (size_t i = 0; i < sizeof transient / sizeof *transient; i++)
            if (!strcmp(s3_code, transient[i])) return 1;
    }
    return 0;
}

static double uniform01(uint64_t *s) {
    /* xorshift64*: plenty for jitter, no global state. */
    uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return (double)((x * 0x2545f4914f6cdd1dull) >> 11) / 9007199254740992.0;
}

double vdn_retry_delay(int attempt, double base, double cap, uint64_t *rng) {
    if (attempt < 1) attempt = 1;
    double d = base;
    for (int i = 1; i < attempt && d < cap; i++)
        d *= 2;
    if (d > cap) d = cap;
    return d / 2 + uniform01(rng) * d / 2;
}
