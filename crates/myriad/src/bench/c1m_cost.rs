//! What a c1m publish costs: the CPU one publish added above holding's, of the
//! server and of the whole box, and what an asked rate needs of the box from it.

use super::report::count;

/// CPU-µs per publish that a phase of `sent` publishes, at `cpu` % of a core over
/// `window_s`, added to holding's `held` %; none without publishes.
pub(super) fn per_publish_us(cpu: f64, held: f64, window_s: f64, sent: u64) -> Option<f64> {
    (sent > 0).then(|| (cpu - held).max(0.0) / 100.0 * window_s / sent as f64 * 1e6)
}

/// The report's text for a phase's whole-box CPU (`now`, percent of a core, out of
/// `cores` percent) and what the `asked` rate needs of it, from holding's share
/// `held` and the phase's `sent` publishes over `secs`: a saturated holding leaves
/// nothing to read a publish's cost above. None without publishes.
pub(super) fn box_budget(
    (held, now): (f64, f64),
    (secs, sent): (f64, u64),
    asked: f64,
    cores: f64,
) -> Option<String> {
    let (needs, per_publish) = needs(held, now, secs, sent, asked)?;
    Some(if held >= SATURATED * cores {
        format!(
            "{now:.0} % of {cores:.0} % / more than this box has: holding alone took {held:.0} %, \
             so a publish's cost cannot be read above it"
        )
    } else {
        format!(
            "{now:.0} % of {cores:.0} % / ≈ {needs:.0} % (holding {held:.0} % + {} /s × \
             {per_publish:.0} µs per publish above holding){}",
            count(asked),
            if needs > cores {
                ": more than this box has"
            } else {
                ""
            }
        )
    })
}

/// The share of the box's cores past which holding is taken to leave nothing to
/// publish with (the rest is the box's own bursts and the sampling's noise).
pub(super) const SATURATED: f64 = 0.9;

/// What the `asked` rate needs of the whole box (clients, server, kernel, monitor:
/// everything on it), percent of a core, and the CPU-µs one publish added: from
/// holding's share `held` and a phase's `now` (percent of a core) over `secs` with
/// `sent` publishes, holding plus the asked rate times one publish. Where that is
/// more than the box's cores, the phase's latency is a queue for a CPU whatever the
/// server does. None without publishes.
fn needs(held: f64, now: f64, secs: f64, sent: u64, asked: f64) -> Option<(f64, f64)> {
    let per_publish = per_publish_us(now, held, secs, sent)?;
    Some((held + asked * per_publish / 1e6 * 100.0, per_publish))
}

#[cfg(test)]
mod tests {
    use super::{box_budget, needs, per_publish_us};

    #[test]
    fn the_box_budget_says_when_the_asked_rate_does_not_fit() {
        let row = |held, now, asked| box_budget((held, now), (10.0, 5_000), asked, 200.0);
        let fits = row(20.0, 60.0, 1_000.0).unwrap();
        assert!(fits.starts_with("60 % of 200 % / ≈ 100 %"), "{fits}");
        assert!(!fits.contains("more than"), "{fits}");
        let over = row(150.0, 190.0, 1_000.0).unwrap();
        assert!(over.ends_with(": more than this box has"), "{over}");
        let saturated = row(196.0, 195.0, 1_000.0).unwrap();
        assert!(
            saturated.contains("holding alone took 196 %"),
            "{saturated}"
        );
        assert_eq!(box_budget((20.0, 60.0), (10.0, 0), 1_000.0, 200.0), None);
    }

    #[test]
    fn the_asked_rate_needs_holding_plus_what_each_publish_added() {
        // 5,000 publishes in 10 s took the box from 150 % to 190 %: 800 µs each, so
        // 1,000/s needs 150 % + 80 %.
        let (needs_pct, us) = needs(150.0, 190.0, 10.0, 5_000, 1_000.0).unwrap();
        assert_eq!((needs_pct.round(), us.round()), (230.0, 800.0));
        assert_eq!(needs(150.0, 190.0, 10.0, 0, 1_000.0), None);
    }

    #[test]
    fn cpu_per_publish_is_what_the_phase_added_to_holding() {
        // 20,000 publishes over 10 s taking a core from 66 % to 113 %: 235 µs each.
        let us = per_publish_us(113.0, 66.0, 10.0, 20_000);
        assert_eq!(us.map(f64::round), Some(235.0));
        let below = per_publish_us(50.0, 66.0, 10.0, 20_000);
        assert_eq!(below, Some(0.0), "noise below holding");
        assert_eq!(per_publish_us(113.0, 66.0, 10.0, 0), None);
    }
}
