// The client's pure parts: positions and composites, duplicate detection, backoff
// bounds and channel names.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Position, composite, isNew, splitComposite } from "../src/positions.js";
import { backoffDelay } from "../src/backoff.js";
import { checkChannel } from "../src/names.js";

test("composite positions: one part per stream, empty for a stream from now", () => {
  const pos = { a: Position.parse("7-12"), b: null, c: Position.parse("9-0") };
  assert.equal(composite(["a", "b", "c"], (s) => pos[s]), "7-12__9-0");
  assert.equal(composite(["b"], (s) => pos[s]), null);
  assert.deepEqual(splitComposite("7-12__9-0"), [new Position(7, 12), null, new Position(9, 0)]);
  assert.deepEqual(splitComposite("3-4"), [new Position(3, 4)]);
  assert.equal(Position.parse("x-1"), null);
});

test("a message is new past the last seq, in another epoch, or after a gap", () => {
  const at = new Position(5, 10);
  assert.equal(isNew(at, 5, 10), false);
  assert.equal(isNew(at, 5, 9), false);
  assert.equal(isNew(at, 5, 11), true);
  assert.equal(isNew(at, 6, 1), true);
  assert.equal(isNew(null, 5, 1), true);
  assert.equal(isNew(new Position(5, null), 5, 1), true);
});

test("backoff grows to its cap, with half of it random", () => {
  const opts = { initial: 100, max: 1000 };
  assert.equal(backoffDelay(0, opts, () => 0), 50);
  assert.equal(backoffDelay(0, opts, () => 0.999999), 99.99995);
  assert.equal(backoffDelay(3, opts, () => 0), 400);
  assert.equal(backoffDelay(50, opts, () => 0), 500);
  assert.ok(backoffDelay(50, opts, () => 0.999999) < 1000);
});

test("channel names: the server's alphabet, not all digits, not an SSE event of the server", () => {
  for (const ok of ["room:1", "a", "news.eu", "x=y@z,w;v_u-t", "r".repeat(200)]) assert.equal(checkChannel(ok), ok);
  for (const bad of ["", "42", "a b", "é", "r".repeat(201), "gap", "message", 7]) {
    assert.throws(() => checkChannel(bad), TypeError, String(bad));
  }
});
