use super::*;

#[derive(Default, Debug, PartialEq)]
struct Seen {
    head: Vec<u16>,
    messages: u32,
    stamps: Vec<u64>,
    pings: Vec<Vec<u8>>,
    answers: Vec<&'static [u8]>,
    ends: u32,
    done: Vec<u64>,
    malformed: u32,
    /// Pusher: subscribe asked, subscribed, refused.
    pusher: Vec<&'static str>,
}

/// Feed `input` in pieces of `piece` bytes, so every split point is exercised.
fn run(t: Transport, input: &[u8], piece: usize) -> Seen {
    run_with(Scanner::new(0), t, input, piece)
}

fn run_with(mut s: Scanner, t: Transport, input: &[u8], piece: usize) -> Seen {
    let mut seen = Seen::default();
    for part in input.chunks(piece) {
        s.handle_bytes(t, part, &mut |e| match e {
            Event::Head(c) => seen.head.push(c),
            Event::Message => seen.messages += 1,
            Event::Stamp(ts) => seen.stamps.push(ts),
            Event::Ping(p) => seen.pings.push(p.to_vec()),
            Event::Answer(a) => seen.answers.push(a),
            Event::End => seen.ends += 1,
            Event::BodyDone { last } => seen.done.push(last),
            Event::Malformed => seen.malformed += 1,
            Event::Subscribe => seen.pusher.push("subscribe"),
            Event::Subscribed => seen.pusher.push("subscribed"),
            Event::Refused => seen.pusher.push("refused"),
            Event::Body(_) => {}
        });
    }
    seen
}

fn all_splits(t: Transport, input: &[u8]) -> Seen {
    let whole = run(t, input, input.len());
    for piece in 1..8 {
        assert_eq!(run(t, input, piece), whole, "piece size {piece}");
    }
    whole
}

fn chunk(body: &str) -> String {
    format!("{:x}\r\n{body}\r\n", body.len())
}

const HEAD: &str =
    "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n";

#[test]
fn stream_counts_chunks_skips_welcome_and_heartbeats() {
    let input = format!(
        "{HEAD}{}{}{}{}{}",
        chunk("welcome user 7\n"),
        chunk("hello ts=1700000000000001 pad\n"),
        chunk("\n"),
        chunk("no stamp here\n"),
        chunk("ts=1700000000000002")
    );
    let seen = all_splits(Transport::Stream, input.as_bytes());
    assert_eq!(seen.head, vec![200]);
    assert_eq!(seen.messages, 3);
    assert_eq!(
        seen.stamps,
        vec![1_700_000_000_000_001, 1_700_000_000_000_002]
    );
    assert_eq!(seen.ends, 0);
}

#[test]
fn stream_first_stamped_message_is_not_a_welcome() {
    let input = format!("{HEAD}{}", chunk("ts=5 x"));
    assert_eq!(all_splits(Transport::Stream, input.as_bytes()).messages, 1);
}

#[test]
fn stream_end_of_chunked_body_and_bad_status() {
    let input = format!("{HEAD}{}0\r\n\r\n", chunk("hi"));
    assert_eq!(all_splits(Transport::Stream, input.as_bytes()).ends, 1);
    let bad = "HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\nno\n";
    let seen = all_splits(Transport::Stream, bad.as_bytes());
    assert_eq!(seen.head, vec![404]);
    assert_eq!(seen.ends, 1);
}

#[test]
fn stream_without_chunking_counts_stamps() {
    let input = "HTTP/1.0 200 OK\r\n\r\nhello\nts=11 a\nts=12 b\n";
    let seen = all_splits(Transport::Stream, input.as_bytes());
    assert_eq!(seen.messages, 2);
    assert_eq!(seen.stamps, vec![11, 12]);
}

#[test]
fn malformed_chunk_size_is_reported() {
    let input = format!("{HEAD}zz\r\n");
    assert_eq!(all_splits(Transport::Stream, input.as_bytes()).malformed, 1);
}

#[test]
fn sse_counts_events_with_data_only() {
    let body = ": hb\n\nretry: 2000\n\ndata: welcome\n\nid: 1\ndata: a ts=100\ndata: b\n\n: hb\n\nid: 2\r\ndata: c ts=200\r\n\r\n";
    let input = format!("{HEAD}{}", chunk(body));
    let seen = all_splits(Transport::Sse, input.as_bytes());
    assert_eq!(seen.messages, 2);
    assert_eq!(seen.stamps, vec![100, 200]);
}

const WS_HEAD: &[u8] = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n";

/// An unmasked server frame with FIN.
fn frame(op: u8, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0x80 | op];
    if payload.len() < 126 {
        f.push(payload.len() as u8);
    } else {
        f.push(126);
        f.extend_from_slice(&(payload.len() as u16).to_be_bytes());
    }
    f.extend_from_slice(payload);
    f
}

#[test]
fn ws_frames_pings_and_close() {
    let mut input = WS_HEAD.to_vec();
    input.extend(frame(1, b"welcome"));
    input.extend(frame(1, b"m ts=42"));
    input.extend(frame(9, b"p"));
    let big = format!("ts=43 {}", "x".repeat(300));
    input.extend(frame(2, big.as_bytes()));
    input.extend(frame(8, b""));
    let whole = run(Transport::Ws, &input, input.len());
    assert_eq!(whole.head, vec![101]);
    assert_eq!(whole.messages, 2);
    assert_eq!(whole.stamps, vec![42, 43]);
    assert_eq!(whole.pings, vec![b"p".to_vec()]);
    assert_eq!(whole.ends, 1);
    // Split reads still count the same; a ping split across reads gets an empty pong.
    let split = run(Transport::Ws, &input, 3);
    assert_eq!(
        (split.messages, split.stamps.len(), split.pings.len()),
        (2, 2, 1)
    );
}

#[test]
fn socketio_counts_events_and_answers_open_and_ping() {
    let mut input = WS_HEAD.to_vec();
    for packet in [
        &br#"0{"sid":"a","upgrades":[],"pingInterval":25000}"#[..],
        br#"40{"sid":"b"}"#,
        br#"42["m","ts=41 hello"]"#,
        b"2",
        br#"42["m","no stamp"]"#,
        br#"41"#,
        br#"42["m","ts=42 "quoted""]"#,
    ] {
        input.extend(frame(1, packet));
    }
    let seen = all_splits(Transport::Socketio, &input);
    assert_eq!(seen.head, vec![101]);
    assert_eq!(seen.answers, vec![&b"40"[..], b"3"]);
    assert_eq!(seen.stamps, vec![41, 42]);
    // The first event is stamped (no welcome); the namespace reply, the ping and the
    // disconnect are not messages.
    assert_eq!(seen.messages, 3);
}

#[test]
fn stamped_only_counts_no_protocol_reply() {
    let mut input = WS_HEAD.to_vec();
    for payload in [
        &br#"{"subscribed":"r1","pos":"1-0","gap":false}"#[..],
        br#"{"subscribed":"r2","pos":"1-0","gap":false}"#,
        br#"{"channel":"r1","pos":"1-1","data":"ts=7 x"}"#,
    ] {
        input.extend(frame(1, payload));
    }
    let mut s = Scanner::new(0);
    s.stamped_only();
    let seen = run_with(s, Transport::Ws, &input, input.len());
    assert_eq!((seen.messages, seen.stamps.clone()), (1, vec![7]));
    // Without it the second reply passes for a message (the first is the welcome).
    assert_eq!(run(Transport::Ws, &input, input.len()).messages, 2);
}

#[test]
fn poll_counts_seq_keys_and_remembers_last() {
    let body =
        r#"{"messages":[{"seq":4,"data":"ts=7 a"},{"seq":5,"data":"b"}],"last":5,"gap":false}"#;
    let input = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let seen = all_splits(Transport::Poll, input.as_bytes());
    assert_eq!(seen.messages, 2);
    assert_eq!(seen.stamps, vec![7]);
    assert_eq!(seen.done, vec![5]);
    let mut s = Scanner::new(0);
    s.handle_bytes(Transport::Poll, input.as_bytes(), &mut |_| {});
    assert_eq!(s.last(), 5);
    s.next_response();
    assert_eq!(s.last(), 5);
}

fn pusher_run(frames: &[&[u8]]) -> Seen {
    let mut input = WS_HEAD.to_vec();
    for payload in frames {
        input.extend(frame(1, payload));
    }
    let mut s = Scanner::new(0);
    s.stamped_only();
    let whole = run_with(s, Transport::Pusher, &input, input.len());
    for piece in 1..8 {
        assert_eq!(
            run_with(s, Transport::Pusher, &input, piece),
            whole,
            "piece size {piece}"
        );
    }
    whole
}

#[test]
fn pusher_subscribes_once_established_and_counts_stamped_events() {
    let seen = pusher_run(&[
        br#"{"event":"pusher:connection_established","data":"{\"socket_id\":\"1.2\",\"activity_timeout\":30}"}"#,
        br#"{"event":"pusher_internal:subscription_succeeded","channel":"bench","data":"{}"}"#,
        br#"{"event":"pusher:ping","data":"{}"}"#,
        br#"{"event":"bench","channel":"bench","data":"ts=41 x"}"#,
        // Any key order (Sockudo writes the channel first) and a data object.
        br#"{"channel":"bench","data":{"m":"ts=42"},"event":"bench"}"#,
        br#"{"event":"pusher:error","data":{"code":null,"message":"no"}}"#,
        br#"{"event":"pusher_internal:member_added","channel":"presence-a","data":"{}"}"#,
        br#"{"event":"bench","channel":"bench","data":"no stamp"}"#,
        // A name that only starts like one of the protocol's is a message.
        br#"{"event":"pusher:pingx","data":"ts=43"}"#,
    ]);
    assert_eq!(seen.head, vec![101]);
    assert_eq!(seen.pusher, vec!["subscribe", "subscribed"]);
    assert_eq!(seen.answers, vec![super::pusher::PONG]);
    assert_eq!((seen.messages, seen.stamps.clone()), (3, vec![41, 42, 43]));
}

#[test]
fn pusher_event_names_inside_data_do_not_count() {
    let seen = pusher_run(&[
        br#"{"event":"chat","channel":"c","data":"{\"event\":\"pusher:ping\"} ts=5"}"#,
        br#"{"event":"pusher:subscription_error","channel":"c","data":{"status":401}}"#,
    ]);
    assert_eq!(seen.answers.len(), 0);
    assert_eq!(seen.messages, 1);
    assert_eq!(seen.pusher, vec!["refused"]);
}

#[test]
fn pusher_never_panics_on_noise() {
    // A fixed-seed generator: frames of random bytes biased towards the needles.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let alphabet = br#"{}":,\ pusher:ping_internalsubscription_succeededevent ts=0123456789"#;
    for _ in 0..2000 {
        let mut payload = Vec::new();
        for _ in 0..(x % 90) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            payload.push(alphabet[(x % alphabet.len() as u64) as usize]);
        }
        let mut input = WS_HEAD.to_vec();
        input.extend(frame(1, &payload));
        input.extend(frame(1, br#"{"event":"pusher:ping"}"#));
        let seen = run(Transport::Pusher, &input, 3);
        assert!(
            seen.answers.len() <= 2 && seen.malformed == 0,
            "{payload:?}"
        );
    }
}

#[test]
fn scanner_stays_small() {
    assert!(std::mem::size_of::<Scanner>() <= 40);
}

#[test]
fn numbers_past_u64_saturate() {
    // A chunk size of more hex digits than a u64 holds (found by `flood_scan`): the
    // size saturates, and so do a long-poll `"last":`, a stamp and a Content-Length.
    let size = "e".repeat(40);
    let input =
        format!("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n{size}8a\r\nts=12 ab");
    let seen = all_splits(Transport::Stream, input.as_bytes());
    assert_eq!(seen.head, vec![200]);
    let digits = "9".repeat(40);
    let input = format!(
        "HTTP/1.1 200 OK\r\nContent-Length: {digits}\r\n\r\n{{\"last\":{digits}}} ts={digits}"
    );
    let seen = all_splits(Transport::Poll, input.as_bytes());
    assert_eq!(seen.head, vec![200]);
}
