//! `wire`: HTTP/1.1 request heads and response encoders (chunked, SSE, long-poll, WebSocket). Sans-IO: bytes in, bytes out.
