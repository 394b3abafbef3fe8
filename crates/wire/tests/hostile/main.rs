//! Hostile input, one row per attack: malformed or abusive request heads, bodies
//! and WebSocket frames, each with the exact HTTP status or close code a client
//! gets back. This table is the contract of D2 ("bad input gets a clear error").
//!
//! One file per kind of input: `heads` (request heads and routing), `bodies` (chunked
//! and Content-Length bodies), `frames` (WebSocket client frames).

mod bodies;
mod frames;
mod heads;
