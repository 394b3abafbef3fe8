// Positions `<epoch>-<seq>` of one stream (a channel, or the user's own deliveries)
// and the composite `since` that lists one per stream of a connection. A Position
// also decides which messages are new: a resume may overlap what was delivered, and
// the application must see each message once.

/** Where one stream stands: the epoch of its history and the last seq delivered. */
export class Position {
  /** @param {number} epoch @param {number | null} seq null: after a gap, any seq is next */
  constructor(epoch, seq) {
    this.epoch = epoch;
    this.seq = seq;
  }

  /** `"7-12"` → Position; an empty or malformed text → null (the stream starts from now). */
  static parse(text) {
    const m = /^(\d+)-(\d+)$/.exec(text ?? "");
    return m ? new Position(Number(m[1]), Number(m[2])) : null;
  }

  toString() {
    return `${this.epoch}-${this.seq ?? 0}`;
  }
}

/**
 * Whether a message at (`epoch`, `seq`) comes after `pos`: true in another epoch (the
 * server reports the lost history as a gap) or past the last delivered seq.
 */
export function isNew(pos, epoch, seq) {
  return pos === null || pos.seq === null || pos.epoch !== epoch || seq > pos.seq;
}

/**
 * The composite position of a connection whose streams are `streams` (the user's first,
 * then each channel in URL order): their positions joined by `_`, an empty part for a
 * stream that starts from now. Null when no stream has a position.
 */
export function composite(streams, positionOf) {
  const parts = streams.map((s) => positionOf(s)?.toString() ?? "");
  return parts.some((p) => p !== "") ? parts.join("_") : null;
}

/** The parts of a composite position, one Position (or null) per stream. */
export function splitComposite(text) {
  return String(text ?? "").split("_").map(Position.parse);
}

/** The stream of the user's own deliveries (the path's id), beside the channels. */
export const USER = Symbol("user");
