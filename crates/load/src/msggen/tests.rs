//! msggen's subjects, pacing, payloads and NATS subjects.

use super::*;

#[test]
fn subjects_stay_in_range_and_power_law_is_skewed() {
    let mut rng = rand::rngs::SmallRng::seed_from_u64(1);
    let mut ones = 0;
    for _ in 0..10_000 {
        let s = pick_subject(&mut rng, Dist::Power, 1000, 1.2);
        assert!((1..=1000).contains(&s));
        ones += u32::from(s == 1);
    }
    // Uniform would give ~10 hits on subject 1; the power law gives hundreds.
    assert!(ones > 200, "{ones}");
    for _ in 0..1000 {
        assert!((1..=7).contains(&pick_subject(&mut rng, Dist::Uniform, 7, 1.0)));
    }
}

#[test]
fn publishers_interleave_into_one_evenly_spaced_stream() {
    // 5 msg/s over 3 publishers: each sends every 600 ms; their first sends at
    // 0, 200 and 400 ms make the merged stream one message every 200 ms.
    let offsets: Vec<_> = (0..3).map(|i| first_offset(5.0, i)).collect();
    assert_eq!(offsets, [0, 200, 400].map(Duration::from_millis));
    let interval = Duration::from_secs_f64(3.0 / 5.0);
    let mut sends: Vec<Duration> = offsets
        .iter()
        .flat_map(|&o| (0..10).map(move |k| o + interval * k))
        .collect();
    sends.sort();
    for pair in sends.windows(2) {
        let gap = pair[1] - pair[0];
        assert!(
            gap.abs_diff(Duration::from_millis(200)) < Duration::from_micros(1),
            "{gap:?}"
        );
    }
    // As fast as possible: no stagger.
    assert_eq!(first_offset(0.0, 3), Duration::ZERO);
}

#[test]
fn payload_is_stamped_and_padded() {
    let mut p = Vec::new();
    payload(64, &mut p);
    assert_eq!(p.len(), 64);
    assert!(p.starts_with(b"ts=1"));
    payload(0, &mut p);
    assert!(p.ends_with(b" "));
}

#[test]
fn a_nats_publish_goes_to_the_subject_the_path_names() {
    assert_eq!(nats_subject("/pub/%d", 42).unwrap(), 42);
    assert_eq!(nats_subject("/pub/%d0000000", 42).unwrap(), 420_000_000);
    let e = nats_subject("/pub/%d?x=1", 42).unwrap_err().to_string();
    assert!(e.contains("not a subject id"), "{e}");
}
