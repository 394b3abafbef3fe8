//! Deterministic fuzzing of the publish port's exchange on stable Rust: random and
//! mutated well-formed scripts, bounded by count (`PORT_FUZZ_SEED=<n>` picks another
//! seed). Coverage-guided: `fuzz/` target `port_exchange` (scripts/fuzz.sh).

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const REQUESTS: &[&[u8]] = &[
    b"POST /pub/3 HTTP/1.1\r\nContent-Length: 2\r\n\r\nhi",
    b"POST /pub HTTP/1.1\r\nContent-Length: 24\r\n\r\n{\"subject\":4,\"data\":\"\"}",
    b"POST /pub/9 HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    b"POST /pub/3 HTTP/1.0\r\nContent-Length: 1\r\n\r\nx",
    b"POST /pub/3 HTTP/1.1\r\nConnection: close\r\nContent-Length: 1\r\n\r\nx",
    b"GET /pub/3 HTTP/1.1\r\n\r\n",
    b"POST /pub/3 HTTP/1.1\r\nOrigin: https://a.example\r\n\r\n",
    b"POST /pub/3 HTTP/1.1\r\nContent-Length: 999999\r\n\r\n",
    b"GET /nowhere HTTP/1.1\r\n\r\n",
];

#[test]
fn scripts_keep_their_properties() {
    let seed = std::env::var("PORT_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(40);
    let mut rng = StdRng::seed_from_u64(seed);
    for _ in 0..20_000 {
        let mut script = vec![rng.gen(), rng.gen(), rng.gen()];
        if rng.gen_bool(0.3) {
            let n = rng.gen_range(0..300);
            script.extend((0..n).map(|_| rng.gen::<u8>()));
        } else {
            for _ in 0..rng.gen_range(1..6) {
                script.extend_from_slice(REQUESTS[rng.gen_range(0..REQUESTS.len())]);
            }
            for _ in 0..rng.gen_range(0..4) {
                if script.len() > 3 {
                    let at = rng.gen_range(3..script.len());
                    script[at] = rng.gen();
                }
            }
        }
        cluster::publish_port::exchange_script(&script);
    }
}
