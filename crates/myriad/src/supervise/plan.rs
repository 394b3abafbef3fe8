//! How many gateway processes a supervised server runs and how many connections each
//! may hold: pure arithmetic over `--processes`, `--max-connections` and the file
//! limit, so it is unit-tested without starting anything.

use gateway::config::FD_RESERVE;
use std::str::FromStr;

/// Gateways `--processes auto` starts beyond what the connections need: room for
/// the clients of a gateway that died while it is being restarted, and for the
/// imbalance of SO_REUSEPORT's hash as gateways fill and leave the group.
pub const SPARE: usize = 1;

/// `--processes`: a number of gateway processes, or `auto`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Processes {
    Auto,
    Count(usize),
}

impl FromStr for Processes {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.eq_ignore_ascii_case("auto") {
            return Ok(Processes::Auto);
        }
        match s.parse::<usize>() {
            Ok(n) if n >= 1 => Ok(Processes::Count(n)),
            _ => Err(format!(
                "{s:?}: --processes takes a number of gateways (1 or more) or `auto`"
            )),
        }
    }
}

/// What the supervisor starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Plan {
    pub gateways: usize,
    /// `--max-connections` of each gateway.
    pub per_gateway: usize,
}

/// `total` is the server's `--max-connections`; `nofile` the file limit a child gets
/// (the hard RLIMIT_NOFILE: children raise their soft limit to it).
pub fn plan(processes: Processes, total: usize, nofile: u64) -> anyhow::Result<Plan> {
    let cap = nofile.saturating_sub(FD_RESERVE as u64) as usize;
    anyhow::ensure!(
        cap > 0,
        "the file limit ({nofile}) leaves no room for connections; raise it (`myriad doctor`)"
    );
    let total = total.max(1);
    // The gateways that carry `total` between them; a spare carries nothing planned.
    let (gateways, carriers) = match processes {
        Processes::Auto => {
            let carriers = total.div_ceil(cap);
            (carriers + SPARE, carriers)
        }
        Processes::Count(n) => (n, n),
    };
    Ok(Plan {
        gateways,
        per_gateway: total.div_ceil(carriers).min(cap),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_covers_the_target_under_the_file_limit_plus_a_spare() {
        // A million under this machine's 20,000 files: 51 carriers + 1 spare.
        let p = plan(Processes::Auto, 1_000_000, 20_000).unwrap();
        assert_eq!(p.gateways, 52);
        assert!(p.per_gateway <= 20_000 - FD_RESERVE);
        assert!(p.per_gateway * (p.gateways - SPARE) >= 1_000_000);
        // A small target: one carrier, one spare, each allowed the whole target.
        let p = plan(Processes::Auto, 1000, 20_000).unwrap();
        assert_eq!((p.gateways, p.per_gateway), (2, 1000));
    }

    #[test]
    fn a_given_count_shares_the_target_within_the_file_limit() {
        let p = plan(Processes::Count(3), 120, 20_000).unwrap();
        assert_eq!((p.gateways, p.per_gateway), (3, 40));
        let p = plan(Processes::Count(3), 1_000_000, 20_000).unwrap();
        assert_eq!((p.gateways, p.per_gateway), (3, 20_000 - FD_RESERVE));
        assert!(plan(Processes::Count(3), 10, 100).is_err());
    }

    #[test]
    fn processes_parse() {
        assert_eq!("auto".parse(), Ok(Processes::Auto));
        assert_eq!("4".parse(), Ok(Processes::Count(4)));
        assert!("0".parse::<Processes>().is_err());
        assert!("many".parse::<Processes>().is_err());
    }
}
