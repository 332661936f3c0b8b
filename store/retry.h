/* When and how long to wait before retrying an S3 request. Pure functions, unit-tested. */
#ifndef VDN_STORE_RETRY_H
#define VDN_STORE_RETRY_H

#include <stdint.h>

/* Is a finished HTTP exchange worth retrying? curl_code is a CURLcode (0 = a response came
 * back), http_status the response status (0 when none), s3_code the <Code> of an S3 error body
 * ("" when none). Retry: connection-level failures, 5xx, 429, and S3's throttling/transient
 * codes (SlowDown, InternalError, RequestTimeout, ...). Never other 4xx. */
int vdn_retry_is_retryable(int curl_code, long http_status, const char *s3_code);

/* Seconds to sleep before retry number `attempt` (1 = first retry): exponential from base
 * (doubling, capped at cap) with "equal jitter" (half fixed, half uniform random), so the
 * total over several retries is predictable yet clients spread out. rng: caller's state. */
double vdn_retry_delay(int attempt, double base, double cap, uint64_t *rng);

#endif
