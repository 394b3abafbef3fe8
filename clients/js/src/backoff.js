// How long to wait before the next connection attempt: exponential in the number of
// failed attempts, capped, with jitter so that the clients of a restarted server do
// not all come back in the same instant ("equal jitter": half fixed, half random, so
// a delay never collapses to zero).

export const DEFAULT_BACKOFF = { initial: 500, max: 15000 };

/** Milliseconds before attempt `failures` + 1, `random` in [0, 1). */
export function backoffDelay(failures, { initial, max } = DEFAULT_BACKOFF, random = Math.random) {
  const ceiling = Math.min(max, initial * 2 ** Math.min(failures, 30));
  return ceiling / 2 + random() * (ceiling / 2);
}
