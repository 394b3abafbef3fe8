//! Keys and the table, without sockets: prefixes, limits, the index under many
//! inserts and removals, and the shared table's reclaim of a dead place.

use super::*;
use std::collections::HashMap;
use std::net::IpAddr;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn prefix(s: &str) -> Prefix {
    Prefix::of(ip(s)).unwrap()
}

#[test]
fn ipv4_is_its_address_ipv6_its_64_and_mapped_ipv4_is_ipv4() {
    assert_eq!(prefix("192.0.2.7"), Prefix::V4(0xC000_0207));
    assert_eq!(prefix("::ffff:192.0.2.7"), Prefix::V4(0xC000_0207));
    assert_eq!(
        prefix("2001:db8:1:2:aaaa::1"),
        prefix("2001:db8:1:2:bbbb:cccc:dddd:eeee"),
        "one /64"
    );
    assert_ne!(prefix("2001:db8:1:2::1"), prefix("2001:db8:1:3::1"));
    // The old 32-bit fold made this one 0 (exempt) and the next one 192.0.2.7's key.
    assert_eq!(
        prefix("2001:db8::2001:db8:0:0"),
        Prefix::V6(0x2001_0db8_0000_0000)
    );
    assert_eq!(prefix("::c000:207"), Prefix::V6(0));
    assert_ne!(prefix("::c000:207"), prefix("192.0.2.7"));
}

#[test]
fn only_loopback_addresses_are_exempt() {
    for local in ["127.0.0.1", "127.9.9.9", "::1", "::ffff:127.0.0.1"] {
        assert_eq!(Prefix::of(ip(local)), None, "{local}");
    }
    for remote in ["0.0.0.0", "10.0.0.1", "::", "::2", "2001:db8::", "fe80::1"] {
        assert!(Prefix::of(ip(remote)).is_some(), "{remote}");
    }
}

#[test]
fn a_prefix_gets_its_limit_and_room_again_after_a_close() {
    let table = PeerTable::private(capacity_for(10)).unwrap();
    let a = prefix("2001:db8:0:1::1");
    let same_64 = prefix("2001:db8:0:1::2");
    let other_64 = prefix("2001:db8:0:2::1");
    let h1 = table.admit(a, 2).unwrap();
    let h2 = table.admit(same_64, 2).unwrap();
    assert_eq!(h1, h2, "one entry for one /64");
    assert_eq!(table.admit(a, 2), Err(Refused::PerAddress));
    let h3 = table.admit(other_64, 2).unwrap();
    assert_ne!(h3, h1);
    assert_eq!(table.count(a), 2);
    table.release(h1);
    assert_eq!(table.count(a), 1);
    assert_eq!(table.admit(same_64, 2), Ok(h1));
    // IPv4 and IPv6 keys of equal bits are different prefixes.
    let v4 = Prefix::V4(7);
    let v6 = Prefix::V6(7);
    table.admit(v4, 1).unwrap();
    assert_eq!(table.admit(v6, 1).map(|_| ()), Ok(()));
    assert_eq!(table.admit(v4, 1), Err(Refused::PerAddress));
}

#[test]
fn a_full_table_refuses_new_prefixes_only() {
    let table = PeerTable::private(MIN_CAPACITY).unwrap();
    for i in 0..MIN_CAPACITY {
        table.admit(Prefix::V4(i), 5).unwrap();
    }
    assert_eq!(
        table.admit(Prefix::V4(u32::MAX), 5),
        Err(Refused::TableFull)
    );
    assert!(
        table.admit(Prefix::V4(3), 5).is_ok(),
        "a known prefix still counts"
    );
}

#[test]
fn many_admits_and_releases_keep_every_count_exact() {
    let table = PeerTable::private(MIN_CAPACITY).unwrap();
    let mut model: HashMap<Prefix, Vec<u32>> = HashMap::new();
    let mut x: u64 = 0x2545_F491_4F6C_DD1D;
    for _ in 0..200_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let p = if x & 1 == 0 {
            Prefix::V4((x >> 8) as u32 % 400)
        } else {
            Prefix::V6((x >> 8) % 400)
        };
        let held = model.entry(p).or_default();
        if x & 6 != 0 && held.len() < 3 {
            held.push(table.admit(p, 3).unwrap());
        } else if let Some(h) = held.pop() {
            table.release(h);
        } else {
            assert_eq!(table.admit(p, 0), Err(Refused::PerAddress));
        }
    }
    for (p, held) in &model {
        assert_eq!(table.count(*p), held.len() as u32, "{p:?}");
    }
}

#[test]
fn a_shared_table_holds_the_limit_across_places_and_reclaims_a_dead_one() {
    let (supervisor, fd) = PeerTable::shared(capacity_for(100), 2).unwrap();
    let one = PeerTable::open(fd, 0).unwrap();
    let two = PeerTable::open(fd, 1).unwrap();
    let p = prefix("192.0.2.7");
    let q = prefix("2001:db8::1");
    let kept = one.admit(p, 3).unwrap();
    two.admit(p, 3).unwrap();
    two.admit(p, 3).unwrap();
    assert_eq!(one.admit(p, 3), Err(Refused::PerAddress), "3 in all");
    two.admit(q, 3).unwrap();

    // Place 1 dies while holding the lock and three counts.
    let dead = 4_000_000; // above pid_max's default: no live process has it
    supervisor.header().lock.store(dead, Ordering::Release);
    supervisor.reclaim(1, dead);
    assert_eq!(supervisor.count(p), 1, "place 0's count only");
    assert_eq!(supervisor.count(q), 0);
    assert_eq!(one.admit(q, 3).map(|_| ()), Ok(()));
    one.admit(p, 3).unwrap();
    one.admit(p, 3).unwrap();
    assert_eq!(one.admit(p, 3), Err(Refused::PerAddress));
    one.release(kept);
    assert_eq!(supervisor.count(p), 2);

    assert!(matches!(
        PeerTable::open(fd, 2),
        Err(TableError::NoPlace { .. })
    ));
    // SAFETY: closing the test's own descriptor.
    unsafe { libc::close(fd) };
}

#[test]
fn a_descriptor_without_a_table_is_refused() {
    // SAFETY: a fresh memfd of the test's own.
    let fd = unsafe { libc::memfd_create(c"not-a-table".as_ptr(), 0) };
    assert!(fd >= 0);
    assert_eq!(unsafe { libc::ftruncate(fd, 4096) }, 0);
    assert!(matches!(
        PeerTable::open(fd, 0),
        Err(TableError::NotATable { .. })
    ));
    unsafe { libc::close(fd) };
}
