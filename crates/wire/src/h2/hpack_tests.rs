//! HPACK decoding: RFC 7541 Appendix C, the inputs that once aborted the server,
//! caps, the table's life, and random bytes.

use super::*;
use crate::h2::huffman::encode as huffman;

const OPEN: Caps = Caps {
    fields: usize::MAX,
    list_size: usize::MAX,
};

fn fields(d: &mut Decoder, block: &[u8]) -> Result<Vec<(String, String)>, HpackError> {
    let mut out = Vec::new();
    d.decode(block, OPEN, |n, v| {
        out.push((
            String::from_utf8_lossy(n).into_owned(),
            String::from_utf8_lossy(v).into_owned(),
        ))
    })?;
    Ok(out)
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.split_whitespace().collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

#[test]
fn rfc_7541_c3_requests_without_huffman() {
    let mut d = Decoder::new();
    let first = hex("8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d");
    assert_eq!(
        fields(&mut d, &first).unwrap(),
        pairs(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com")
        ])
    );
    let second = hex("8286 84be 5808 6e6f 2d63 6163 6865");
    assert_eq!(
        fields(&mut d, &second).unwrap(),
        pairs(&[
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
            ("cache-control", "no-cache")
        ])
    );
    assert_eq!(d.table_len(), 2);
}

#[test]
fn rfc_7541_c4_requests_with_huffman() {
    let mut d = Decoder::new();
    let first = hex("8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff");
    assert_eq!(
        fields(&mut d, &first).unwrap()[3],
        (":authority".into(), "www.example.com".into())
    );
    let second = hex("8286 84be 5886 a8eb 1064 9cbf");
    assert_eq!(
        fields(&mut d, &second).unwrap()[4],
        ("cache-control".into(), "no-cache".into())
    );
}

#[test]
fn a_cut_short_size_update_is_an_error_not_a_panic() {
    // The 10-byte frame's whole header block (fluke-hpack 0.3.1 panicked on it).
    assert_eq!(
        Decoder::new().decode(&[0x3f], OPEN, |_, _| {}),
        Err(HpackError::Truncated)
    );
    for cut in [
        &[0x3f, 0xe1][..],
        &[0x7f],
        &[0x0f],
        &[0x00, 0x85, b'a'],
        &[0xff, 0x80],
    ] {
        assert!(
            Decoder::new().decode(cut, OPEN, |_, _| {}).is_err(),
            "{cut:?}"
        );
    }
}

#[test]
fn huge_integers_and_bad_indexes_are_errors() {
    let huge = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f];
    assert_eq!(
        Decoder::new().decode(&huge, OPEN, |_, _| {}),
        Err(HpackError::Integer)
    );
    assert_eq!(
        Decoder::new().decode(&[0x80], OPEN, |_, _| {}),
        Err(HpackError::Index)
    );
    assert_eq!(
        Decoder::new().decode(&[0xbe], OPEN, |_, _| {}),
        Err(HpackError::Index)
    );
    assert_eq!(
        Decoder::new().decode(&[0x40 | 62], OPEN, |_, _| {}),
        Err(HpackError::Index)
    );
}

#[test]
fn size_updates_are_bounded_placed_and_owed() {
    let mut d = Decoder::new();
    // Above the default 4096 allowed.
    assert_eq!(
        d.decode(&hex("3fe2 1f"), OPEN, |_, _| {}),
        Err(HpackError::SizeAbove)
    );
    // After a field.
    assert_eq!(
        d.decode(&hex("8220"), OPEN, |_, _| {}),
        Err(HpackError::SizeMisplaced)
    );
    // Our SETTINGS said 0: the next block must open with an update to ≤ 0.
    let mut d = Decoder::new();
    fields(&mut d, &hex("4003 6162 6303 6465 66")).unwrap();
    assert_eq!(d.table_len(), 1);
    d.set_limit(0);
    assert_eq!(
        d.decode(&[0x82], OPEN, |_, _| {}),
        Err(HpackError::SizeOwed)
    );
    let mut d = Decoder::new();
    fields(&mut d, &hex("4003 6162 6303 6465 66")).unwrap();
    d.set_limit(0);
    assert_eq!(
        d.decode(&hex("21 82"), OPEN, |_, _| {}),
        Err(HpackError::SizeAbove)
    );
    assert_eq!(
        fields(&mut d, &hex("20 82")).unwrap(),
        pairs(&[(":method", "GET")])
    );
    assert_eq!(d.table_len(), 0);
    // With a table of 0, an insert is dropped and the heap given back.
    fields(&mut d, &hex("4003 6162 6303 6465 66")).unwrap();
    assert_eq!((d.table_len(), d.table.capacity()), (0, 0));
}

#[test]
fn the_table_evicts_oldest_first() {
    let mut d = Decoder::new();
    // max 100: two entries of 32 + 6 fit, a third evicts the first.
    let mut block = hex("3f45");
    for name in ["aaa", "bbb", "ccc"] {
        block.extend_from_slice(&[0x40, 3]);
        block.extend_from_slice(name.as_bytes());
        block.extend_from_slice(&[3, b'x', b'y', b'z']);
    }
    fields(&mut d, &block).unwrap();
    assert_eq!(d.table_len(), 2);
    assert_eq!(fields(&mut d, &[0xbe]).unwrap(), pairs(&[("ccc", "xyz")]));
    assert_eq!(fields(&mut d, &[0xbf]).unwrap(), pairs(&[("bbb", "xyz")]));
    assert_eq!(d.decode(&[0xc0], OPEN, |_, _| {}), Err(HpackError::Index));
}

#[test]
fn caps_stop_handing_out_fields_but_keep_the_table_in_step() {
    let mut block = Vec::new();
    for i in 0..10u8 {
        // Literal with indexing, new name "h<i>", value "v".
        block.extend_from_slice(&[0x40, 2, b'h', b'0' + i, 1, b'v']);
    }
    let mut d = Decoder::new();
    let mut seen = 0;
    let caps = Caps {
        fields: 3,
        list_size: usize::MAX,
    };
    let done = d.decode(&block, caps, |_, _| seen += 1).unwrap();
    assert_eq!((seen, done.fields, done.capped), (3, 10, true));
    assert_eq!(d.table_len(), 10);
    assert_eq!(fields(&mut d, &[0xbe]).unwrap(), pairs(&[("h9", "v")]));
    let caps = Caps {
        fields: 100,
        list_size: 2 * 35,
    };
    let mut seen = 0;
    let done = Decoder::new()
        .decode(&block, caps, |_, _| seen += 1)
        .unwrap();
    assert_eq!((seen, done.capped), (2, true));
}

#[test]
fn huffman_literals_round_trip() {
    let mut d = Decoder::new();
    let mut block = vec![0x00];
    let name = huffman(b"x-custom");
    block.push(0x80 | name.len() as u8);
    block.extend_from_slice(&name);
    let value = huffman(b"\x00\xff binary \x7f");
    block.push(0x80 | value.len() as u8);
    block.extend_from_slice(&value);
    let mut got = Vec::new();
    d.decode(&block, OPEN, |n, v| got.push((n.to_vec(), v.to_vec())))
        .unwrap();
    assert_eq!(
        got,
        vec![(b"x-custom".to_vec(), b"\x00\xff binary \x7f".to_vec())]
    );
}

#[test]
fn random_blocks_never_panic() {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::SmallRng::seed_from_u64(7);
    let mut d = Decoder::new();
    for _ in 0..20_000 {
        let len = rng.gen_range(0..40);
        let block: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        if d.decode(&block, OPEN, |_, _| {}).is_err() {
            d = Decoder::new();
        }
        assert!(d.size <= d.max && d.max <= DEFAULT_TABLE);
    }
}
