//! `wire`: myriad's sans-IO HTTP/1.1 codec — request heads, routing, request
//! bodies, and the response encoders of every transport (chunked streaming, SSE,
//! long-poll, WebSocket). Bytes in, bytes out: no sockets, no clock, no runtime,
//! so every parser is fuzzable and every answer is checked byte for byte.
//!
//! Not here: connection state, timeouts and write queues (the gateway), who
//! receives what (the router).
//!
//! # Layout
//!
//! | module | concept |
//! |---|---|
//! | `head` | request heads: [`parse_head`] → [`RequestHead`] or [`HeadError`] (status) |
//! | `endpoints` | [`Route`], [`RouteError`]: the endpoints a head can ask for, and why none |
//! | `route` | [`route`]: which endpoint a head asks for |
//! | `query` | `since` and `token` of subscription paths |
//! | `since` | [`Since`]: a resume position `<seq>` or `<epoch>-<seq>` |
//! | `body` | [`BodyDecoder`]: Content-Length / chunked bodies, incremental |
//! | `batch` | [`parse_batch_with`]: NDJSON batch publish bodies, typed and bounded |
//! | `edges` | [`parse_edges_with`]: "A B" edge lists for bulk subscriptions, bounded |
//! | `response` | complete responses and error answers |
//! | `stream` | chunked streaming (A1) |
//! | `sse` | Server-Sent Events (A2) |
//! | `poll` | long-poll JSON bodies (A3) |
//! | `ws` | WebSocket handshake, frames, fragmentation state (A4) |
//! | [`pusher`] | the Pusher Channels protocol's JSON frames, `/app/<key>` (J1) |
//! | [`pusher_user`] | Pusher user ids and sign-in, a user's internal channel, per-app namespaces |
//! | [`h2`] | HTTP/2 frames, response HEADERS, stream ↔ HTTP/1.1 bridging (issue 13) |
//!
//! # Client-visible failures
//!
//! | error | answer |
//! |---|---|
//! | [`HeadError`] | 400 malformed / bare LF line ending / duplicate `Host`, `Origin` or other single header / absolute-form target without a host / bad `Last-Event-ID` / bad framing / bad upgrade, 417 Expect, 431 too large, 501 Transfer-Encoding, 505 version; then close |
//! | [`RouteError`] | 404, 405 (+ `Allow`), 400 bad id or `since` (`BadId`), 400 repeated or badly escaped `token` (`BadQuery`), 426 (+ `Upgrade`) |
//! | [`BodyError`] | 413 too large, 400 malformed chunked; then close |
//! | [`BatchError`] | 400 malformed line (not an object, wrong field type, repeated field, bad JSON); 413 an item's `data` over `max_item` (`--max-message`), a line longer than any valid item, more than `max_items` items; the message names the line |
//! | [`EdgeError`] | 400 malformed line; 413 more than `max_edges` edges; the message names the line |
//! | [`WsError`] | close 1002 protocol error, 1007 invalid UTF-8, 1009 too big |
//!
//! Resume positions ([`Since`]: `<seq>` or `<epoch>-<seq>`) come from `?since=` on
//! every subscription path and from `Last-Event-ID` (SSE, where it wins over the
//! URL); `?token=` carries a JWT for clients that cannot set `Authorization`.
//! HTTP/1.0 requests are flagged ([`RequestHead::is_http10`]) so streaming answers
//! can be close-delimited.
//!
//! Hand-rolled chunked decoding and WebSocket framing are deliberate: the gateway
//! keeps no per-connection buffers (≤ 256 B per idle connection) and parses from a
//! per-loop scratch buffer, so decoders must resume at any byte with tiny state.

mod batch;
mod body;
pub mod channel;
mod edges;
mod endpoints;
pub mod h2;
mod head;
mod poll;
pub mod pusher;
pub mod pusher_user;
mod query;
mod response;
mod route;
mod since;
mod sse;
mod stream;
mod ws;

pub use batch::{
    parse_batch, parse_batch_with, BatchError, BatchItem, BatchLimits, DEFAULT_MAX_BATCH_ITEMS,
    DEFAULT_MAX_ITEM,
};
pub use body::{BodyDecoder, BodyError, MAX_CHUNK_EXT, MAX_TRAILER};
pub use edges::{parse_edges, parse_edges_with, EdgeError, DEFAULT_MAX_EDGES};
pub use endpoints::{Present, PusherCall, Route, RouteError, StreamControl, Transport};
pub use head::{
    parse_head, BodyKind, HeadError, Limits, Method, RequestHead, WsUpgrade, DEFAULT_MAX_HEAD,
    DEFAULT_MAX_HEADERS,
};
pub use poll::write_poll_body;
pub use response::{
    add_header, reason_phrase, write_api_answer, write_error_response, write_response, CONTINUE_100,
};
pub use route::route;
pub use since::{parse_positions, write_positions, Since};
pub use sse::{write_sse_data, write_sse_gap, write_sse_head, write_sse_id, SSE_HEARTBEAT};
pub use stream::{
    write_chunk, write_stream_head, write_stream_head_http10, write_stream_line,
    write_stream_message, write_stream_position, write_welcome_chunk, STREAM_END, STREAM_HEARTBEAT,
};
pub use ws::{
    is_valid_close_code, parse_ws_frame, write_ws_client_frame, write_ws_close, write_ws_frame,
    write_ws_handshake, write_ws_position, ws_accept_key, ws_client_frame, ws_message_opcode,
    Opcode, WsError, WsFrame, WsMessageState, MAX_CONTROL_PAYLOAD,
};
