/* The retry policy: which failures are retried, and the backoff's shape. */
#include "retry.h"
#include "check.h"

#include <curl/curl.h>
#include <math.h>

int main(void) {
    /* Connection-level failures are transient. */
    CHECK(vdn_retry_is_retryable(CURLE_COULDNT_CONNECT, 0, ""));
    CHECK(vdn_retry_is_retryable(CURLE_OPERATION_TIMEDOUT, 0, ""));
    CHECK(vdn_retry_is_retryable(CURLE_RECV_ERROR, 0, ""));
    CHECK(vdn_retry_is_retryable(CURLE_SEND_ERROR, 0, ""));
    CHECK(vdn_retry_is_retryable(CURLE_GOT_NOTHING, 0, ""));
    /* Local or programming errors are not. */
    CHECK(!vdn_retry_is_retryable(CURLE_URL_MALFORMAT, 0, ""));
    CHECK(!vdn_retry_is_retryable(CURLE_WRITE_ERROR, 0, ""));
    CHECK(!vdn_retry_is_retryable(CURLE_ABORTED_BY_CALLBACK, 0, ""));
    /* Every 5xx, 429, SlowDown; never other 4xx. */
    for (long s = 500; s <= 599; s++)
        CHECK(vdn_retry_is_retryable(CURLE_OK, s, ""));
    CHECK(vdn_retry_is_retryable(CURLE_OK, 429, ""));
    CHECK(vdn_retry_is_retryable(CURLE_OK, 503, "SlowDown"));
    CHECK(vdn_retry_is_retryable(CURLE_OK, 400, "RequestTimeout"));
    for (long s = 400; s <= 499; s++)
        if (s != 429) CHECK(!vdn_retry_is_retryable(CURLE_OK, s, ""));
    CHECK(!vdn_retry_is_retryable(CURLE_OK, 403, "AccessDenied"));
    CHECK(!vdn_retry_is_retryable(CURLE_OK, 403, "SignatureDoesNotMatch"));
    CHECK(!vdn_retry_is_retryable(CURLE_OK, 404, "NoSuchKey"));
    CHECK(!vdn_retry_is_retryable(CURLE_OK, 200, ""));
    CHECK(!vdn_retry_is_retryable(CURLE_OK, 204, NULL));

    /* Backoff: attempt k waits in [d/2, d] with d = min(base * 2^(k-1), cap); the mean is
     * 3d/4 (uniform upper half); different seeds give different waits (that is the jitter). */
    const double base = 0.25, cap = 20.0;
    uint64_t rng = 12345;
    for (int k = 1; k <= 12; k++) {
        double d = fmin(base * pow(2.0, k - 1), cap);
        double sum = 0, lo = 1e9, hi = -1;
        const int n = 20000;
        for (int i = 0; i < n; i++) {
            double w = vdn_retry_delay(k, base, cap, &rng);
            sum += w;
            lo = fmin(lo, w);
            hi = fmax(hi, w);
        }
        CHECK(lo >= d / 2 - 1e-12);
        CHECK(hi <= d + 1e-12);
        CHECK(fabs(sum / n - 0.75 * d) < 0.01 * d);
        CHECK(hi - lo > 0.4 * d); /* spread over (nearly) the whole jitter range */
    }
    uint64_t a = 1, b = 2;
    CHECK(vdn_retry_delay(3, base, cap, &a) != vdn_retry_delay(3, base, cap, &b));
    return check_report("test_retry");
}
