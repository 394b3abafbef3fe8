// Channel names as the server accepts them (docs/protocol.md, "Channels"): checked
// here so a bad name fails at the call that made it, not as a refused connection
// that a reconnect loop would repeat.

const NAME = /^[A-Za-z0-9_\-=@,.;:]{1,200}$/;
const DIGITS = /^[0-9]+$/;
/** SSE event names the server uses for itself: a channel cannot take them. */
const RESERVED = new Set(["message", "gap", "expired", "refused", "drain"]);

/** Throws a TypeError naming what is wrong with `name`, or returns it. */
export function checkChannel(name) {
  if (typeof name !== "string" || !NAME.test(name)) {
    throw new TypeError(
      `invalid channel name ${JSON.stringify(name)}: 1-200 characters of A-Z a-z 0-9 _ - = @ , . ; :`,
    );
  }
  if (DIGITS.test(name)) {
    throw new TypeError(`invalid channel name "${name}": an all-digit name is a user id`);
  }
  if (RESERVED.has(name)) {
    throw new TypeError(`invalid channel name "${name}": reserved for the server's own SSE events`);
  }
  return name;
}
