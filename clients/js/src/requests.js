// WebSocket requests sent and not answered yet, oldest first. The server answers each
// with one frame that names its kind (`subscribed`, `unsubscribed`, `published`,
// `refreshed`) or is an error naming the channel concerned (or none): answers are
// matched to the oldest request they fit, since a publish's answer may come after a
// later subscribe's.

export class Requests {
  #sent = [];

  /** `request`: {kind, channel?, resolve?, reject?}. */
  add(request) {
    this.#sent.push(request);
  }

  /** The oldest request of `kind` (about `channel`, when given), removed. */
  take(kind, channel) {
    return this.#take((r) => r.kind === kind && (channel === undefined || r.channel === channel));
  }

  /** The oldest request of any kind about `channel` (a name, or a numeric subject), removed. */
  takeAbout(channel) {
    return this.#take((r) => r.channel === channel || r.channel === Number(channel));
  }

  /** Rejects every request (the connection is gone). */
  failAll(error) {
    for (const r of this.#sent.splice(0)) r.reject?.(error);
  }

  #take(match) {
    const i = this.#sent.findIndex(match);
    return i < 0 ? undefined : this.#sent.splice(i, 1)[0];
  }
}
