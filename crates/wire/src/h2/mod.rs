//! HTTP/2 (RFC 9113) for the gateway, sans-IO: the frame codec, the few response
//! headers the gateway sends (encoded by hand, no HPACK state), HPACK decoding of
//! requests, and the bridge between an HTTP/2 stream and the HTTP/1.1 bytes the
//! connection core speaks.
//!
//! Why hand-written (crates/tls/README.md, "HTTP/2 for the gateway"): the `h2` crate
//! keeps ~33 KB of buffers per connection whatever the traffic; this layer keeps none
//! of its own (the caller holds a partial frame only while one is incomplete). The
//! HPACK decoder is ours too (`hpack` says why); responses use only the static table
//! and literals.
//!
//! Not here: connection and stream state, flow-control accounting, sockets (the
//! gateway's `pump::h2`).
//!
//! | module | concept |
//! |---|---|
//! | `frame` | [`parse_frame`]: one frame from a buffer, or "not yet", or a connection error |
//! | `encode` | frame writers and the response HEADERS block |
//! | `hpack` | [`hpack::Decoder`]: request header blocks (RFC 7541), caps enforced while decoding |
//! | `huffman` | HPACK's Huffman code, decoded by a 4-bit state machine |
//! | `request` | [`write_request_head`]: decoded request headers → an HTTP/1.1 head and its body's [`Framing`] |
//! | `response` | [`ResponseReader`]: the core's HTTP/1.1 response bytes → head, body, end |

mod encode;
mod frame;
pub mod hpack;
pub mod huffman;
mod request;
mod response;

pub use encode::{
    write_data, write_goaway, write_headers, write_int as write_hpack_int, write_ping,
    write_rst_stream, write_settings, write_settings_ack, write_window_update,
};
pub use frame::{parse_frame, parse_settings, Frame, FrameError, Setting};
pub use request::{write_request_head, Framing, RequestError};
pub use response::{Part, ResponseError, ResponseReader};

/// What a client sends first (RFC 9113 3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// The frame header's size.
pub const FRAME_HEADER: usize = 9;
/// SETTINGS_MAX_FRAME_SIZE's initial value: the largest frame either side accepts
/// until told otherwise. The gateway never raises its own.
pub const DEFAULT_MAX_FRAME: u32 = 16_384;
/// SETTINGS_INITIAL_WINDOW_SIZE's initial value, and the connection window's.
pub const DEFAULT_WINDOW: u32 = 65_535;
/// The largest flow-control window (RFC 9113 6.9.1).
pub const MAX_WINDOW: u32 = (1 << 31) - 1;

/// Frame types (RFC 9113 6).
pub mod kind {
    pub const DATA: u8 = 0;
    pub const HEADERS: u8 = 1;
    pub const PRIORITY: u8 = 2;
    pub const RST_STREAM: u8 = 3;
    pub const SETTINGS: u8 = 4;
    pub const PUSH_PROMISE: u8 = 5;
    pub const PING: u8 = 6;
    pub const GOAWAY: u8 = 7;
    pub const WINDOW_UPDATE: u8 = 8;
    pub const CONTINUATION: u8 = 9;
}

/// Frame flags.
pub mod flag {
    pub const END_STREAM: u8 = 0x1;
    pub const ACK: u8 = 0x1;
    pub const END_HEADERS: u8 = 0x4;
    pub const PADDED: u8 = 0x8;
    pub const PRIORITY: u8 = 0x20;
}

/// Error codes (RFC 9113 7).
pub mod code {
    pub const NO_ERROR: u32 = 0x0;
    pub const PROTOCOL_ERROR: u32 = 0x1;
    pub const INTERNAL_ERROR: u32 = 0x2;
    pub const FLOW_CONTROL_ERROR: u32 = 0x3;
    pub const STREAM_CLOSED: u32 = 0x5;
    pub const FRAME_SIZE_ERROR: u32 = 0x6;
    pub const REFUSED_STREAM: u32 = 0x7;
    pub const CANCEL: u32 = 0x8;
    pub const COMPRESSION_ERROR: u32 = 0x9;
    pub const ENHANCE_YOUR_CALM: u32 = 0xb;
}

/// SETTINGS identifiers (RFC 9113 6.5.2).
pub mod setting {
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    pub const ENABLE_PUSH: u16 = 0x2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
}
