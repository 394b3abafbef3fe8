//! The fuzz targets' entry points: how each target reads one input (its first
//! bytes select limits and cut points), shared by the libFuzzer binaries in
//! `fuzz/` and the corpus replay in `tests/fuzz_strict.rs`, so a seed or a crash
//! means the same thing to both.

use wire::{BatchLimits, BodyKind, Limits};

/// `parse_head`: byte 0 picks the limits, bytes 1–4 the prefix cuts; the rest is
/// the request. Complete heads are also routed.
pub fn parse_head(data: &[u8]) {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let (cuts, input) = rest.split_at(rest.len().min(4));
    let limits = if sel & 1 == 0 {
        Limits::default()
    } else {
        Limits {
            max_head: 64 + usize::from(sel >> 1),
            max_headers: usize::from(sel >> 5),
        }
    };
    let cuts: Vec<usize> = cuts.iter().map(|&c| usize::from(c)).collect();
    super::check_head(input, &limits, &cuts);
}

/// `BodyDecoder`: byte 0 the framing, bytes 1–2 the limit, 3–6 the split points.
pub fn body_decoder(data: &[u8]) {
    if data.len() < 7 {
        return;
    }
    let (params, input) = data.split_at(7);
    let limit = usize::from(u16::from_le_bytes([params[1], params[2]]));
    let kind = match params[0] % 3 {
        0 => BodyKind::Chunked,
        1 => BodyKind::Length(u64::from(params[0])),
        _ => BodyKind::None,
    };
    let cuts: Vec<usize> = params[3..].iter().map(|&c| usize::from(c)).collect();
    super::check_body(kind, limit, input, &cuts);
}

/// `parse_ws_frame`: bytes 0–1 the payload limit, 2–5 the prefix cuts.
pub fn ws_frame(data: &[u8]) {
    if data.len() < 6 {
        return;
    }
    let (params, input) = data.split_at(6);
    let max = usize::from(u16::from_le_bytes([params[0], params[1]]));
    let cuts: Vec<usize> = params[2..].iter().map(|&c| usize::from(c)).collect();
    super::check_ws_frame(input, max, &cuts);
}

/// A stream of client frames through `WsMessageState`.
pub fn ws_stream(data: &[u8]) {
    super::check_ws_stream(data, 1 << 16);
}

/// Batch bodies: byte 0 picks small limits (`max_item` = byte / 4, `max_items` =
/// byte % 4 + 1) or, when 0xff, the defaults; the rest is the body.
pub fn batch(data: &[u8]) {
    let Some((&sel, body)) = data.split_first() else {
        return;
    };
    super::check_batch(body);
    let limits = if sel == 0xff {
        BatchLimits::default()
    } else {
        BatchLimits {
            max_item: usize::from(sel / 4),
            max_items: usize::from(sel % 4) + 1,
        }
    };
    super::check_batch_with(body, &limits);
}

/// Edge lists.
pub fn edges(data: &[u8]) {
    super::check_edges(data);
}

/// Heads through `route` (absolute-form targets, `since` and `token` queries).
pub fn route(data: &[u8]) {
    super::check_route(data);
}

/// Resume positions (`Last-Event-ID`, `?since=`).
pub fn since(data: &[u8]) {
    super::check_since(data);
}

/// A target's entry point.
pub type Target = fn(&[u8]);

/// Every target by name (the names of `fuzz/Cargo.toml`'s binaries and of the
/// seed directories under `fuzz/seeds/`).
pub const TARGETS: &[(&str, Target)] = &[
    ("parse_head", parse_head),
    ("body_decoder", body_decoder),
    ("ws_frame", ws_frame),
    ("ws_stream", ws_stream),
    ("batch", batch),
    ("edges", edges),
    ("route", route),
    ("since", since),
    ("h2_frames", h2_frames),
    ("hpack", hpack),
    ("pusher", pusher),
];

/// A Pusher client's text frame (`wire::pusher`), the same bytes as a channel
/// message's payload and as an `/app/` query: never a panic, and what is read
/// writes back to the same event.
pub fn pusher(data: &[u8]) {
    use wire::pusher::{parse_client_frame, protocol_of, write_event, ClientFrame, Published};
    if let Ok(ClientFrame::ClientEvent {
        event,
        channel,
        data: d,
    }) = parse_client_frame(data)
    {
        let mut out = Vec::new();
        write_event(&mut out, &event, Some(&channel), &d);
        let v: serde_json::Value = serde_json::from_slice(&out).expect("written JSON parses");
        assert_eq!(v["event"], event.as_str());
        assert_eq!(v["data"], d.as_str());
    }
    let p = Published::read(data);
    let again = Published::read(&p.to_envelope());
    assert_eq!(again, p, "an envelope reads back as itself");
    let text = std::str::from_utf8(data).ok();
    let _ = protocol_of(text);
    if let Some(Ok((id, info))) = text.map(wire::pusher::parse_channel_data) {
        assert!(info
            .as_ref()
            .is_none_or(|i| i.len() <= wire::pusher::MAX_USER_INFO));
        pusher_member(&id, info);
    }
    if let Some(Ok(id)) = text.map(wire::pusher_user::parse_user_data) {
        pusher_member(&id, None);
    }
    if let Ok(ClientFrame::Signin {
        user_data: Some(d), ..
    }) = parse_client_frame(data)
    {
        let _ = wire::pusher_user::parse_user_data(&d);
    }
    // A channel name from the bytes: its namespaced form shows back as itself.
    if let Some(name) = text.filter(|t| wire::pusher_user::check_name(t).is_ok()) {
        let inner = wire::pusher_user::internal("app2:", name);
        assert_eq!(wire::pusher_user::shown(&inner), name);
        assert_eq!(wire::pusher_user::shown(name), name);
    }
}

/// A member's id, kept with its info as myriad keeps it, shows back as itself
/// (the myriad user of a non-numeric id is a hash this crate does not make: any
/// value stands for it).
fn pusher_member(id: &str, info: Option<String>) {
    use wire::pusher_user::{member_info, numeric, read_member};
    let user = numeric(id).unwrap_or(u64::MAX);
    let kept = member_info(id, info.clone());
    let (back, shown_info) = read_member(user, kept.as_deref());
    assert_eq!(back, id, "{kept:?}");
    let want: serde_json::Value = info
        .and_then(|i| serde_json::from_str(&i).ok())
        .unwrap_or(serde_json::Value::Null);
    assert_eq!(shown_info, want, "{kept:?}");
}

/// HTTP/2 frames: byte 0 picks the largest frame (16,384 or 2^24-1) and the split
/// of the response-reader pass; the rest is what a client sends after the preface.
pub fn h2_frames(data: &[u8]) {
    let Some((&sel, input)) = data.split_first() else {
        return;
    };
    let max_frame = if sel & 1 == 0 { 16_384 } else { (1 << 24) - 1 };
    super::check_h2_frames(input, max_frame, usize::from(sel >> 1));
}

/// HPACK: byte 0 picks the caps and whether our SETTINGS (table size 0) was
/// acknowledged before a block; the rest is header blocks, each preceded by its
/// length byte, decoded in turn on one decoder.
pub fn hpack(data: &[u8]) {
    let Some((&sel, mut rest)) = data.split_first() else {
        return;
    };
    let caps = wire::h2::hpack::Caps {
        fields: usize::from(sel & 0x1f),
        list_size: 64 << (sel >> 5),
    };
    let mut decoder = wire::h2::hpack::Decoder::new();
    let mut blocks = 0;
    while let Some((&len, tail)) = rest.split_first() {
        let block = &tail[..usize::from(len).min(tail.len())];
        rest = &tail[block.len()..];
        blocks += 1;
        if blocks == 2 && sel & 0x10 != 0 {
            decoder.set_limit(0);
        }
        if !super::check_hpack_block(&mut decoder, block, caps) {
            return;
        }
    }
}
