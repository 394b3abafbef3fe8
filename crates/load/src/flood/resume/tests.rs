use super::*;
use crate::flood::scan::{Event, Scanner};

/// What one connection counted: messages, and the counters.
fn run(t: Transport, track: &mut Track, input: &[u8], piece: usize) -> (u64, ResumeCounts) {
    track.connecting();
    let mut scan = Scanner::new(0);
    scan.track();
    let (mut messages, mut c) = (0, ResumeCounts::default());
    for part in input.chunks(piece) {
        scan.handle_bytes(t, part, &mut |e| match e {
            Event::Message => messages += u64::from(track.on_message(t)),
            Event::Body(b) => track.feed(t, b, &mut c),
            Event::BodyDone { .. } => track.body_done(&mut c),
            _ => {}
        });
    }
    (messages, c)
}

/// Every split of `input` gives the same messages, counters and position.
fn all_splits(t: Transport, start: Track, input: &[u8]) -> (u64, ResumeCounts, Since) {
    let mut whole = start.clone();
    let (m, c) = run(t, &mut whole, input, input.len());
    for piece in 1..6 {
        let mut tr = start.clone();
        assert_eq!(run(t, &mut tr, input, piece), (m, c), "piece {piece}");
        assert_eq!(tr.pos, whole.pos, "piece {piece}");
    }
    (m, c, whole.pos)
}

fn at(epoch: u32, seq: u64) -> Track {
    Track {
        pos: Since {
            epoch: Some(epoch),
            seq,
        },
        ..Default::default()
    }
}

const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\nretry: 2000\n\n";

#[test]
fn sse_counts_a_first_message_without_a_stamp_and_no_id_less_welcome() {
    let plain = format!("{SSE_HEAD}data: welcome\n\nid: 3-5\ndata: a\n\nid: 3-6\ndata: b\n\n");
    let (m, c, pos) = all_splits(Transport::Sse, at(3, 4), plain.as_bytes());
    assert_eq!((m, c), (2, ResumeCounts::default()));
    assert_eq!(pos.to_string(), "3-6");
    // myriad sends no welcome: its first event is a message.
    let first = format!("{SSE_HEAD}id: 3-5\ndata: a\n\nid: 3-6\ndata: b\n\n");
    let (m, c, _) = all_splits(Transport::Sse, at(3, 4), first.as_bytes());
    assert_eq!((m, c), (2, ResumeCounts::default()));
}

#[test]
fn sse_follows_ids_and_counts_lost_duplicate_and_gap() {
    let ok = format!("{SSE_HEAD}id: 3-5\ndata: ts=1 a\n\n: hb\n\nid: 3-6\ndata: ts=2 b\n\n");
    let (m, c, pos) = all_splits(Transport::Sse, at(3, 4), ok.as_bytes());
    assert_eq!((m, c), (2, ResumeCounts::default()));
    assert_eq!(pos.to_string(), "3-6");

    let holes = format!("{SSE_HEAD}id: 3-4\ndata: ts=1 a\n\nid: 3-8\ndata: ts=2 b\n\n");
    let (m, c, _) = all_splits(Transport::Sse, at(3, 4), holes.as_bytes());
    assert_eq!((m, c.duplicates, c.lost), (2, 1, 3));

    // A gap event is told, not counted as a message, and its next id is the new base.
    let gap = format!(
        "{SSE_HEAD}event: gap\ndata: {{\"first\":9,\"epoch\":4}}\n\nid: 4-9\ndata: ts=3 c\n\n"
    );
    let (m, c, pos) = all_splits(Transport::Sse, at(3, 4), gap.as_bytes());
    assert_eq!((m, c.gaps, c.lost, c.duplicates), (1, 1, 0, 0));
    assert_eq!(pos.to_string(), "4-9");
}

#[test]
fn poll_bodies_settle_at_their_end() {
    let body = |b: &str| format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{b}", b.len());
    let ok = body(
        r#"{"messages":[{"seq":5,"data":"ts=1 a"},{"seq":6,"data":"b \"gap\":true"}],"last":6,"gap":false,"epoch":3,"since":"3-6"}"#,
    );
    let (m, c, pos) = all_splits(Transport::Poll, at(3, 4), ok.as_bytes());
    assert_eq!((m, c), (2, ResumeCounts::default()));
    assert_eq!(pos.to_string(), "3-6");
    let lost =
        body(r#"{"messages":[{"seq":7,"data":"x"}],"last":7,"gap":false,"epoch":3,"since":"3-7"}"#);
    let (_, c, _) = all_splits(Transport::Poll, at(3, 4), lost.as_bytes());
    assert_eq!((c.lost, c.gaps), (2, 0));
    // A gap moves the client to the server's numbers without counting them lost.
    let gap =
        body(r#"{"messages":[{"seq":1,"data":"x"}],"last":1,"gap":true,"epoch":9,"since":"9-1"}"#);
    let (m, c, pos) = all_splits(Transport::Poll, at(3, 4), gap.as_bytes());
    assert_eq!((m, c.gaps, c.lost, c.duplicates), (1, 1, 0, 0));
    assert_eq!(pos.to_string(), "9-1");
}

fn chunk(body: &str) -> String {
    format!("{:x}\r\n{body}\r\n", body.len())
}

const STREAM_HEAD: &str = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";

#[test]
fn stream_reads_its_position_then_counts_messages() {
    let input = format!(
        "{STREAM_HEAD}{}{}{}{}{}",
        chunk("welcome 7\n"),
        chunk("position 3-4\n"),
        chunk("ts=1 a\n"),
        chunk("\n"),
        chunk("ts=2 position 9-9 b\n")
    );
    let (m, c, pos) = all_splits(Transport::Stream, at(3, 4), input.as_bytes());
    assert_eq!((m, c), (2, ResumeCounts::default()));
    assert_eq!(pos.to_string(), "3-6");
    // Placed behind what it asked: the replay repeats two; a gap is told.
    let behind = format!(
        "{STREAM_HEAD}{}{}",
        chunk("welcome 7\n"),
        chunk("position 3-2\n")
    );
    assert_eq!(
        all_splits(Transport::Stream, at(3, 4), behind.as_bytes())
            .1
            .duplicates,
        2
    );
    let gap = format!(
        "{STREAM_HEAD}{}{}",
        chunk("welcome 7\n"),
        chunk("position 5-0 gap\n")
    );
    let (_, c, pos) = all_splits(Transport::Stream, at(3, 4), gap.as_bytes());
    assert_eq!((c.gaps, c.lost, pos.to_string()), (1, 0, "5-0".into()));
}

#[test]
fn websocket_reads_its_position_frame_then_counts_messages() {
    let mut input = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n".to_vec();
    let frame = |payload: &str| {
        let mut f = vec![0x81, payload.len() as u8];
        f.extend_from_slice(payload.as_bytes());
        f
    };
    input.extend(frame(r#"{"position":"0","gap":false}"#));
    input.extend(frame("ts=1 a"));
    input.extend(frame("ts=2 b"));
    let (m, c, pos) = all_splits(Transport::Ws, Track::default(), &input);
    assert_eq!((m, c), (2, ResumeCounts::default()));
    assert_eq!(pos.to_string(), "2");
    let mut gap = b"HTTP/1.1 101 Switching Protocols\r\n\r\n".to_vec();
    gap.extend(frame(r#"{"position":"7-3","gap":true}"#));
    let (_, c, pos) = all_splits(Transport::Ws, at(3, 4), &gap);
    assert_eq!((c.gaps, pos.to_string()), (1, "7-3".into()));
}

#[test]
fn backoff_is_bounded_and_jittered() {
    assert_eq!(backoff(0, 0), BACKOFF_BASE / 2);
    assert!(backoff(0, u32::MAX) <= BACKOFF_BASE * 3 / 2);
    assert!(backoff(3, u32::MAX / 2) > backoff(2, u32::MAX / 2));
    assert!(backoff(200, u32::MAX) <= BACKOFF_MAX * 3 / 2);
}

#[test]
fn track_stays_small() {
    // One per connection number with --reconnect only; the slab entry is unchanged.
    let size = std::mem::size_of::<Track>();
    assert!(size <= 128, "{size}");
}
