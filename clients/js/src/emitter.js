// The application's listeners, by event name. A listener that throws does not stop
// the others or the client: its exception is reported asynchronously, as the
// platform's EventTarget does.

export class Emitter {
  #listeners = new Map();

  /** Adds `fn` for `type`; returns a function that removes it. */
  on(type, fn) {
    if (!this.#listeners.has(type)) this.#listeners.set(type, new Set());
    this.#listeners.get(type).add(fn);
    return () => this.off(type, fn);
  }

  off(type, fn) {
    this.#listeners.get(type)?.delete(fn);
  }

  emit(type, value) {
    for (const fn of [...(this.#listeners.get(type) ?? [])]) {
      try {
        fn(value);
      } catch (e) {
        queueMicrotask(() => {
          throw e;
        });
      }
    }
  }
}
