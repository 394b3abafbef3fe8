// The tests' server: the real `myriad` binary, started on a loopback port and read
// from its log for the bound addresses; plus what the tests do to it (publish over
// HTTP, kill -9, restart on the same port) and HS256 tokens for a --jwt-secret server.

import { spawn } from "node:child_process";
import { createHmac } from "node:crypto";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import WebSocket from "ws";
import { EventSource } from "eventsource";
import { MyriadClient } from "../index.js";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../../..");

/** The server binary: $MYRIAD_BIN, else the repository's release build, else its debug build. */
export function myriadBin() {
  if (process.env.MYRIAD_BIN) return resolve(process.env.MYRIAD_BIN);
  const found = ["target/release/myriad", "target/debug/myriad"].map((p) => join(repo, p)).find(existsSync);
  if (!found) throw new Error("no myriad binary: set MYRIAD_BIN or run `cargo build --release -p myriad`");
  return found;
}

export const JWT_SECRET = "a-test-secret-of-at-least-32-bytes-long";

/** An HS256 JWT for JWT_SECRET with `claims`, valid for an hour unless `exp` is given. */
export function token(claims) {
  const b64 = (v) => Buffer.from(JSON.stringify(v)).toString("base64url");
  const body = `${b64({ alg: "HS256", typ: "JWT" })}.${b64({ exp: Math.floor(Date.now() / 1000) + 3600, ...claims })}`;
  return `${body}.${createHmac("sha256", JWT_SECRET).update(body).digest("base64url")}`;
}

export class Server {
  /** `myriad serve` on loopback with `--store memory` unless `args` name a store. */
  static async start(args = [], listen = "127.0.0.1:0") {
    const server = new Server(args);
    await server.#spawn(listen);
    return server;
  }

  constructor(args) {
    this.args = args.includes("--store") ? args : ["--store", "memory", ...args];
    this.log = [];
  }

  get base() {
    return `http://${this.addr}`;
  }

  async #spawn(listen) {
    const child = spawn(myriadBin(), ["serve", "--listen", listen, "--admin", "127.0.0.1:0", ...this.args], {
      env: { ...process.env, MYRIAD_LOG: "info", MYRIAD_LOG_FORMAT: "text", NO_COLOR: "1" },
      stdio: ["ignore", "ignore", "pipe"],
    });
    this.child = child;
    this.exited = new Promise((done) => child.on("exit", (code, signal) => done({ code, signal })));
    const lines = createInterface({ input: child.stderr });
    this.addr = await new Promise((ok, fail) => {
      const timer = setTimeout(() => fail(new Error(`myriad did not start in 30 s:\n${this.log.join("\n")}`)), 30000);
      child.on("exit", (code) => fail(new Error(`myriad exited (${code}) before listening:\n${this.log.join("\n")}`)));
      lines.on("line", (line) => {
        this.log.push(line);
        const m = /listen=(\S+)/.exec(line);
        if (m) {
          clearTimeout(timer);
          ok(m[1]);
        }
      });
    });
  }

  /** SIGKILL by pid, then the same server (same flags, same port) started again. */
  async killAndRestart() {
    await this.kill();
    await this.#spawn(this.addr);
  }

  async kill() {
    this.child.kill("SIGKILL");
    await this.exited;
  }

  async stop() {
    if (this.child.exitCode === null && this.child.signalCode === null) {
      this.child.kill("SIGTERM");
      const timer = setTimeout(() => this.child.kill("SIGKILL"), 10000);
      await this.exited;
      clearTimeout(timer);
    }
  }

  /** `POST /pub/<channel>` → the server's JSON answer. */
  async publish(channel, data) {
    const res = await fetch(`${this.base}/pub/${channel}`, { method: "POST", body: data });
    const body = await res.text();
    if (!res.ok) throw new Error(`publish to ${channel}: ${res.status} ${body}`);
    return JSON.parse(body);
  }
}

/** A temporary directory, removed by the returned function. */
export function tempDir() {
  const dir = mkdtempSync(join(tmpdir(), "myriad-js-"));
  return [dir, () => rmSync(dir, { recursive: true, force: true })];
}

/** A client of `server` with Node's constructors and quick reconnects. */
export function client(server, options = {}) {
  return new MyriadClient(server.base, {
    WebSocket,
    EventSource,
    backoff: { initial: 100, max: 1000 },
    ...options,
  });
}

/** Collects a client's messages per channel, and its gaps and errors. */
export function record(c) {
  const got = { messages: {}, gaps: [], errors: [] };
  c.on("message", (m) => (got.messages[m.channel ?? `user:${m.user}`] ??= []).push(m.data));
  c.on("gap", (g) => got.gaps.push(g));
  c.on("error", (e) => got.errors.push(e));
  return got;
}

/** Resolves once `check()` is true (polled every 20 ms); fails after `ms` with `what`. */
export async function until(check, what, ms = 10000) {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what()}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
